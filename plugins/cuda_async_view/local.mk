pkglib_LTLIBRARIES += plugins/cuda_async_view/crmm_cuda_async_view.la
plugins_cuda_async_view_crmm_cuda_async_view_la_SOURCES = plugins/cuda_async_view/cuda_async_view_plugin.c
plugins_cuda_async_view_crmm_cuda_async_view_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) -I$(top_srcdir)/plugins/cuda_async_view/include
plugins_cuda_async_view_crmm_cuda_async_view_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_cuda_async_view_crmm_cuda_async_view_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
# its public header (crmm_cuda_async_view_create and the pool handle)
crmminclude_HEADERS += plugins/cuda_async_view/include/crmm/cuda_async_view.h
