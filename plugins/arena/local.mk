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
	plugins/arena/arena_dump.c \
	$(DEVICE_DEFAULT_SOURCES) \
	$(RESOURCE_LABEL_SOURCES) \
	$(CAPTURE_CHECK_SOURCES) $(GRAPH_PARK_SOURCES) $(PTR_MAP_SOURCES)
plugins_arena_crmm_arena_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_arena_crmm_arena_la_LIBADD = $(PLUGIN_LIBADD)
AM_CPPFLAGS += -I$(top_srcdir)/plugins/arena/include
crmminclude_HEADERS += plugins/arena/include/crmm/arena.h
