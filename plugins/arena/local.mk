# plugins/arena: the arena suballocator (per-thread arenas over a global arena, RMM's arena).
pkglib_LTLIBRARIES += plugins/arena/crmm_arena.la
plugins_arena_crmm_arena_la_SOURCES = \
	plugins/arena/arena_plugin.c \
	plugins/arena/arena_resource.h \
	plugins/arena/arena_global.c \
	plugins/arena/arena_global.h \
	plugins/arena/arena_slab.c \
	plugins/arena/arena_slab.h \
	plugins/arena/arena_size_class.h \
	plugins/arena/arena_thread_cache.c \
	plugins/arena/arena_thread_cache.h \
	plugins/arena/arena_stream_order.c \
	plugins/arena/arena_dump.c
plugins_arena_crmm_arena_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) -I$(top_srcdir)/plugins/arena/include $(SUPPORT_CPPFLAGS)
plugins_arena_crmm_arena_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_arena_crmm_arena_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
crmminclude_HEADERS += plugins/arena/include/crmm/arena.h
