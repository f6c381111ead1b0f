pkglib_LTLIBRARIES += plugins/system/crmm_system.la
plugins_system_crmm_system_la_SOURCES = plugins/system/system_plugin.c
plugins_system_crmm_system_la_CPPFLAGS = $(PLUGIN_CPPFLAGS)
plugins_system_crmm_system_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_system_crmm_system_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
