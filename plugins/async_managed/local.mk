pkglib_LTLIBRARIES += plugins/async_managed/crmm_async_managed.la
plugins_async_managed_crmm_async_managed_la_SOURCES = plugins/async_managed/async_managed_plugin.c
plugins_async_managed_crmm_async_managed_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) -I$(top_srcdir)/plugins/async_managed/include
plugins_async_managed_crmm_async_managed_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_async_managed_crmm_async_managed_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
# its public header (the pool handle)
crmminclude_HEADERS += plugins/async_managed/include/crmm/async_managed.h
