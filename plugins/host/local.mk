pkglib_LTLIBRARIES += plugins/host/crmm_host.la
plugins_host_crmm_host_la_SOURCES = plugins/host/host_plugin.c
plugins_host_crmm_host_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) $(SUPPORT_CPPFLAGS)
plugins_host_crmm_host_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_host_crmm_host_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
