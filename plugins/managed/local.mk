pkglib_LTLIBRARIES += plugins/managed/crmm_managed.la
plugins_managed_crmm_managed_la_SOURCES = plugins/managed/managed_plugin.c $(DIRECT_RESOURCE_SOURCES)
plugins_managed_crmm_managed_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_managed_crmm_managed_la_LIBADD = $(PLUGIN_LIBADD)
