pkglib_LTLIBRARIES += plugins/prefetch/crmm_prefetch.la
plugins_prefetch_crmm_prefetch_la_SOURCES = plugins/prefetch/prefetch_plugin.c
plugins_prefetch_crmm_prefetch_la_CPPFLAGS = $(PLUGIN_CPPFLAGS)
plugins_prefetch_crmm_prefetch_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_prefetch_crmm_prefetch_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
