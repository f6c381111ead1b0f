# plugins/pool: the stream-ordered coalescing suballocator (crmm_pool.so) and its control header.
pkglib_LTLIBRARIES += plugins/pool/crmm_pool.la
plugins_pool_crmm_pool_la_SOURCES = \
	plugins/pool/pool_plugin.c \
	plugins/pool/pool_resource.h plugins/pool/pool_core.h plugins/pool/pool_counts.h plugins/pool/pool_growth_state.h plugins/pool/pool_cache_policy.h \
	plugins/pool/pool_alloc.c \
	plugins/pool/pool_fork.c \
	plugins/pool/pool_block.c plugins/pool/pool_block.h \
	plugins/pool/pool_block_map.c plugins/pool/pool_block_map.h \
	plugins/pool/pool_capture.c plugins/pool/pool_capture.h \
	plugins/pool/pool_free_list.c plugins/pool/pool_free_list.h \
	plugins/pool/pool_growth.c \
	plugins/pool/pool_ipc.c plugins/pool/pool_ipc.h \
	plugins/pool/pool_expand.c \
	plugins/pool/pool_vmm.c plugins/pool/pool_vmm.h \
	plugins/pool/pool_plan.c plugins/pool/pool_plan.h \
	plugins/pool/pool_query.c \
	plugins/pool/pool_streams.c plugins/pool/pool_streams.h \
	plugins/pool/pool_thread_cache.c plugins/pool/pool_thread_cache.h
plugins_pool_crmm_pool_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) -I$(top_srcdir)/plugins/pool/include
plugins_pool_crmm_pool_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_pool_crmm_pool_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
crmminclude_HEADERS += plugins/pool/include/crmm/pool.h
