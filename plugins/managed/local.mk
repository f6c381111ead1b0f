pkglib_LTLIBRARIES += plugins/managed/crmm_managed.la
plugins_managed_crmm_managed_la_SOURCES = plugins/managed/managed_plugin.c
plugins_managed_crmm_managed_la_CPPFLAGS = $(PLUGIN_CPPFLAGS)
plugins_managed_crmm_managed_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_managed_crmm_managed_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
