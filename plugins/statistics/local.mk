pkglib_LTLIBRARIES += plugins/statistics/crmm_statistics.la
plugins_statistics_crmm_statistics_la_SOURCES = plugins/statistics/statistics_plugin.c
plugins_statistics_crmm_statistics_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) -I$(top_srcdir)/plugins/statistics/include
plugins_statistics_crmm_statistics_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_statistics_crmm_statistics_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
crmminclude_HEADERS += plugins/statistics/include/crmm/statistics.h
