# libcrmm/streams_buffers.mk: streams, the stream pool, device buffers and the copy helpers.
libcrmm_la_SOURCES += \
	libcrmm/stream_internal.h \
	libcrmm/stream.c \
	libcrmm/stream_pool.c \
	libcrmm/copy.c \
	libcrmm/device_buffer.c
crmminclude_HEADERS += \
	include/crmm/stream.h \
	include/crmm/stream_pool.h \
	include/crmm/device_buffer.h
