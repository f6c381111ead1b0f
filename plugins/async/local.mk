pkglib_LTLIBRARIES += plugins/async/crmm_async.la
plugins_async_crmm_async_la_SOURCES = plugins/async/async_plugin.c
plugins_async_crmm_async_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) -I$(top_srcdir)/plugins/async/include
plugins_async_crmm_async_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_async_crmm_async_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
# its public header (the pool handle and the pool's own counters)
crmminclude_HEADERS += plugins/async/include/crmm/async.h
