pkglib_LTLIBRARIES += plugins/async_managed/crmm_async_managed.la
plugins_async_managed_crmm_async_managed_la_SOURCES = plugins/async_managed/async_managed_plugin.c $(POOL_VIEW_SOURCES)
plugins_async_managed_crmm_async_managed_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_async_managed_crmm_async_managed_la_LIBADD = $(PLUGIN_LIBADD)
# its public header (the pool handle)
AM_CPPFLAGS += -I$(top_srcdir)/plugins/async_managed/include
crmminclude_HEADERS += plugins/async_managed/include/crmm/async_managed.h
