# libcrmm: the core runtime.
lib_LTLIBRARIES += libcrmm.la
libcrmm_la_SOURCES = \
	libcrmm/internal.h \
	libcrmm/error.c \
	libcrmm/log.c \
	libcrmm/size_parse.c \
	libcrmm/cuda_support.c \
	libcrmm/suggest.c libcrmm/suggest.h \
	libcrmm/name_index.c libcrmm/name_index.h \
	libcrmm/params.c \
	libcrmm/file_name.c \
	libcrmm/output_file.c \
	libcrmm/environment.c libcrmm/environment.h libcrmm/getenv.c libcrmm/settings.c libcrmm/settings.h \
	libcrmm/file_trust.c libcrmm/file_trust.h \
	libcrmm/resource.c \
	libcrmm/plugin_loader.c \
	libcrmm/plugin_create.c \
	libcrmm/config_internal.h \
	libcrmm/config_parse.c \
	libcrmm/config_graph.c \
	libcrmm/config_rules.c \
	libcrmm/config_instances.c \
	libcrmm/config.c \
	libcrmm/device_registry.c libcrmm/device_registry.h \
	libcrmm/runtime.c libcrmm/runtime.h \
	libcrmm/fork_guard.c \
	libcrmm/logging_switch.c \
	libcrmm/graph_owner.c \
	libcrmm/stream_internal.h \
	libcrmm/stream.c \
	libcrmm/stream_pool.c \
	libcrmm/copy.c \
	libcrmm/device_buffer.c \
	libcrmm/torch_allocator.c libcrmm/torch_record_stream.c \
	libcrmm/ipc_internal.h libcrmm/ipc_handle.c libcrmm/ipc_export.c libcrmm/ipc_import.c
# only what the public headers mark CRMM_API is exported
libcrmm_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
libcrmm_la_CPPFLAGS = $(CORE_CPPFLAGS) $(INIH_CFLAGS) \
	-DCRMM_PLUGIN_DIR='"$(pkglibdir)"' -DCRMM_SYSCONFDIR='"$(sysconfdir)"'
libcrmm_la_LDFLAGS = -version-info $(CRMM_LT_VERSION) -no-undefined $(AM_LDFLAGS)
libcrmm_la_LIBADD = $(INIH_LIBS) $(CUDA_LIBS) -ldl -lm

crmmincludedir = $(includedir)/crmm
crmminclude_HEADERS = \
	include/crmm/crmm.h \
	include/crmm/error.h \
	include/crmm/log.h \
	include/crmm/resource.h \
	include/crmm/plugin.h \
	include/crmm/config.h \
	include/crmm/cuda_support.h \
	include/crmm/alloc_counters.h \
	include/crmm/export.h \
	include/crmm/fork_guard.h \
	include/crmm/logging_switch.h \
	include/crmm/stream.h \
	include/crmm/stream_pool.h \
	include/crmm/device_buffer.h \
	include/crmm/torch.h \
	include/crmm/graph_owner.h \
	include/crmm/ipc.h
EXTRA_DIST += docs/ipc.md
