pkglib_LTLIBRARIES += plugins/binning/crmm_binning.la
plugins_binning_crmm_binning_la_SOURCES = plugins/binning/binning_plugin.c
plugins_binning_crmm_binning_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) -I$(top_srcdir)/plugins/binning/include $(SUPPORT_CPPFLAGS)
plugins_binning_crmm_binning_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_binning_crmm_binning_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
crmminclude_HEADERS += plugins/binning/include/crmm/binning.h
