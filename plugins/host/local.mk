pkglib_LTLIBRARIES += plugins/host/crmm_host.la
plugins_host_crmm_host_la_SOURCES = plugins/host/host_plugin.c $(DIRECT_RESOURCE_SOURCES) \
	$(PTR_MAP_SOURCES)
plugins_host_crmm_host_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_host_crmm_host_la_LIBADD = $(PLUGIN_LIBADD)
