# tests/streams_buffers.mk — streams, the stream pool, device buffers and the copy helpers.
# check_streams_buffers: argument validation and everything else that needs no device.
# check_streams_buffers_gpu: the documented examples and stream semantics on one GPU.
# check_streams_buffers_2gpu: buffers and streams used while another device is current (2 GPUs).
check_PROGRAMS += tests/check_streams_buffers tests/check_streams_buffers_gpu tests/check_streams_buffers_2gpu
TESTS += tests/check_streams_buffers tests/check_streams_buffers_gpu tests/check_streams_buffers_2gpu

tests_check_streams_buffers_SOURCES = tests/check_streams_buffers.c
tests_check_streams_buffers_CFLAGS = $(TEST_CFLAGS)
tests_check_streams_buffers_LDADD = $(TEST_LDADD)

tests_check_streams_buffers_gpu_SOURCES = tests/check_streams_buffers_gpu.c
tests_check_streams_buffers_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_streams_buffers_gpu_LDADD = $(TEST_LDADD)

tests_check_streams_buffers_2gpu_SOURCES = tests/check_streams_buffers_2gpu.c
tests_check_streams_buffers_2gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_streams_buffers_2gpu_LDADD = $(TEST_LDADD)
