# libcrmm/ipc.mk: sharing device memory with another process (crmm/ipc.h).
libcrmm_la_SOURCES += libcrmm/ipc_internal.h libcrmm/ipc_handle.c libcrmm/ipc_export.c libcrmm/ipc_import.c
crmminclude_HEADERS += include/crmm/ipc.h
EXTRA_DIST += docs/ipc.md
