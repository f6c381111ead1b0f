# tests/gpu_basic.mk — GPU suites for the basic plugins and the per-device registry. Each program
# gates itself (exit 77 without a CUDA device unless CRMM_TEST_REQUIRE_GPU is set).
check_PROGRAMS += tests/check_conformance_gpu tests/check_registry_gpu tests/check_exit_gpu
tests_check_conformance_gpu_SOURCES = tests/check_conformance_gpu.c
tests_check_conformance_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_conformance_gpu_LDADD = $(TEST_LDADD)
tests_check_registry_gpu_SOURCES = tests/check_registry_gpu.c
tests_check_registry_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_registry_gpu_LDADD = $(TEST_LDADD)
tests_check_exit_gpu_SOURCES = tests/check_exit_gpu.c
tests_check_exit_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_exit_gpu_LDADD = $(TEST_LDADD)
TESTS += tests/check_conformance_gpu tests/check_registry_gpu tests/check_exit_gpu
