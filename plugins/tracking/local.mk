pkglib_LTLIBRARIES += plugins/tracking/crmm_tracking.la
plugins_tracking_crmm_tracking_la_SOURCES = \
	plugins/tracking/tracking_plugin.c \
	plugins/tracking/tracking_table.c plugins/tracking/tracking_table.h \
	$(RESOURCE_LABEL_SOURCES) $(PTR_MAP_SOURCES)
plugins_tracking_crmm_tracking_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_tracking_crmm_tracking_la_LIBADD = $(PLUGIN_LIBADD)
AM_CPPFLAGS += -I$(top_srcdir)/plugins/tracking/include
crmminclude_HEADERS += plugins/tracking/include/crmm/tracking.h
