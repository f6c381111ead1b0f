# tests/seed_api.mk — streams, the stream pool, device buffers and the copy helpers.
# check_seed_api: argument validation and everything else that needs no device.
# check_seed_api_gpu: the seed's examples and stream semantics on one GPU.
# check_seed_api_2gpu: buffers and streams used while another device is current (2 GPUs).
check_PROGRAMS += tests/check_seed_api tests/check_seed_api_gpu tests/check_seed_api_2gpu
TESTS += tests/check_seed_api tests/check_seed_api_gpu tests/check_seed_api_2gpu

tests_check_seed_api_SOURCES = tests/check_seed_api.c
tests_check_seed_api_CFLAGS = $(TEST_CFLAGS)
tests_check_seed_api_LDADD = $(TEST_LDADD)

tests_check_seed_api_gpu_SOURCES = tests/check_seed_api_gpu.c
tests_check_seed_api_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_seed_api_gpu_LDADD = $(TEST_LDADD)

tests_check_seed_api_2gpu_SOURCES = tests/check_seed_api_2gpu.c
tests_check_seed_api_2gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_seed_api_2gpu_LDADD = $(TEST_LDADD)
