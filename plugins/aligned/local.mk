pkglib_LTLIBRARIES += plugins/aligned/crmm_aligned.la
plugins_aligned_crmm_aligned_la_SOURCES = plugins/aligned/aligned_plugin.c
plugins_aligned_crmm_aligned_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) $(SUPPORT_CPPFLAGS)
plugins_aligned_crmm_aligned_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_aligned_crmm_aligned_la_LIBADD = support/libcrmmsupport.a $(PLUGIN_LIBADD)
