pkglib_LTLIBRARIES += plugins/prefetch/crmm_prefetch.la
plugins_prefetch_crmm_prefetch_la_SOURCES = plugins/prefetch/prefetch_plugin.c $(CAPTURE_CHECK_SOURCES)
plugins_prefetch_crmm_prefetch_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_prefetch_crmm_prefetch_la_LIBADD = $(PLUGIN_LIBADD)
