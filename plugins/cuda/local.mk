pkglib_LTLIBRARIES += plugins/cuda/crmm_cuda.la
plugins_cuda_crmm_cuda_la_SOURCES = plugins/cuda/cuda_plugin.c
plugins_cuda_crmm_cuda_la_CPPFLAGS = $(PLUGIN_CPPFLAGS)
plugins_cuda_crmm_cuda_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_cuda_crmm_cuda_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
