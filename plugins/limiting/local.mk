pkglib_LTLIBRARIES += plugins/limiting/crmm_limiting.la
plugins_limiting_crmm_limiting_la_SOURCES = plugins/limiting/limiting_plugin.c
plugins_limiting_crmm_limiting_la_CPPFLAGS = $(PLUGIN_CPPFLAGS)
plugins_limiting_crmm_limiting_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_limiting_crmm_limiting_la_LIBADD = $(PLUGIN_LIBADD)
