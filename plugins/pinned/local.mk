pkglib_LTLIBRARIES += plugins/pinned/crmm_pinned.la
plugins_pinned_crmm_pinned_la_SOURCES = plugins/pinned/pinned_plugin.c
plugins_pinned_crmm_pinned_la_CPPFLAGS = $(PLUGIN_CPPFLAGS)
plugins_pinned_crmm_pinned_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_pinned_crmm_pinned_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
