pkglib_LTLIBRARIES += plugins/binning/crmm_binning.la
plugins_binning_crmm_binning_la_SOURCES = plugins/binning/binning_plugin.c \
	$(PTR_MAP_SOURCES) $(FORK_GUARDS_SOURCES)
plugins_binning_crmm_binning_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_binning_crmm_binning_la_LIBADD = $(PLUGIN_LIBADD)
AM_CPPFLAGS += -I$(top_srcdir)/plugins/binning/include
crmminclude_HEADERS += plugins/binning/include/crmm/binning.h
