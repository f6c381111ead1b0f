pkglib_LTLIBRARIES += plugins/statistics/crmm_statistics.la
plugins_statistics_crmm_statistics_la_SOURCES = plugins/statistics/statistics_plugin.c $(FORK_GUARDS_SOURCES)
plugins_statistics_crmm_statistics_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_statistics_crmm_statistics_la_LIBADD = $(PLUGIN_LIBADD)
AM_CPPFLAGS += -I$(top_srcdir)/plugins/statistics/include
crmminclude_HEADERS += plugins/statistics/include/crmm/statistics.h
