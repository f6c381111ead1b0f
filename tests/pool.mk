# tests/pool.mk — the pool plugin: over host and a scripted upstream (CPU), over cuda (GPU).
check_PROGRAMS += tests/check_pool tests/check_pool_gpu
tests_check_pool_SOURCES = tests/check_pool.c
tests_check_pool_CFLAGS = $(TEST_CFLAGS)
tests_check_pool_LDADD = $(TEST_LDADD)
tests_check_pool_gpu_SOURCES = tests/check_pool_gpu.c
tests_check_pool_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_pool_gpu_LDADD = $(TEST_LDADD)
TESTS += tests/check_pool tests/check_pool_gpu
