pkglib_LTLIBRARIES += plugins/failure_callback/crmm_failure_callback.la
plugins_failure_callback_crmm_failure_callback_la_SOURCES = plugins/failure_callback/failure_callback_plugin.c
plugins_failure_callback_crmm_failure_callback_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) -I$(top_srcdir)/plugins/failure_callback/include
plugins_failure_callback_crmm_failure_callback_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_failure_callback_crmm_failure_callback_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
# its public header (the callback type and crmm_failure_callback_set)
crmminclude_HEADERS += plugins/failure_callback/include/crmm/failure_callback.h
