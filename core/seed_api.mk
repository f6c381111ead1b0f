# The seed's API: streams, the stream pool, device buffers and the copy helpers.
libcrmm_la_SOURCES += \
	core/stream_internal.h \
	core/stream.c \
	core/stream_pool.c \
	core/copy.c \
	core/device_buffer.c
crmminclude_HEADERS += \
	include/crmm/stream.h \
	include/crmm/stream_pool.h \
	include/crmm/device_buffer.h
