pkglib_LTLIBRARIES += plugins/logging/crmm_logging.la
plugins_logging_crmm_logging_la_SOURCES = \
	plugins/logging/logging_plugin.c \
	plugins/logging/logging_line.c plugins/logging/logging_line.h \
	plugins/logging/logging_sink.c plugins/logging/logging_sink.h
plugins_logging_crmm_logging_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) -I$(top_srcdir)/plugins/logging/include
plugins_logging_crmm_logging_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_logging_crmm_logging_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
crmminclude_HEADERS += plugins/logging/include/crmm/logging.h
