pkglib_LTLIBRARIES += plugins/tracking/crmm_tracking.la
plugins_tracking_crmm_tracking_la_SOURCES = \
	plugins/tracking/tracking_plugin.c \
	plugins/tracking/tracking_table.c plugins/tracking/tracking_table.h
plugins_tracking_crmm_tracking_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) -I$(top_srcdir)/plugins/tracking/include $(SUPPORT_CPPFLAGS)
plugins_tracking_crmm_tracking_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_tracking_crmm_tracking_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
crmminclude_HEADERS += plugins/tracking/include/crmm/tracking.h
