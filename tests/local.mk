# Check suites. Every test program links the shared helpers; GPU programs gate themselves
# (exit 77 without a device unless CRMM_TEST_REQUIRE_GPU is set).
check_LTLIBRARIES += tests/libcrmmtest.la
tests_libcrmmtest_la_SOURCES = tests/test_support.c tests/test_support.h tests/conformance.c tests/conformance.h \
	tests/fake_streams.c tests/fake_streams.h
tests_libcrmmtest_la_CFLAGS = $(TEST_CFLAGS)
tests_libcrmmtest_la_LIBADD = libcrmm.la $(CHECK_LIBS) $(CUDA_LIBS)

# The tests use the public headers as a user of the installed crmm does, the plugins' with the
# core's; every test program names TEST_CFLAGS, so their folders ride on it.
TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PLUGIN_PUBLIC_CPPFLAGS)
TEST_LDADD = tests/libcrmmtest.la libcrmm.la $(CHECK_LIBS) $(CUDA_LIBS) -lm

AM_TESTS_ENVIRONMENT = \
	CRMM_PLUGIN_PATH='$(abs_top_builddir)/plugins/built:$(abs_top_builddir)/tests/plugins/.libs'; export CRMM_PLUGIN_PATH; \
	CRMM_TEST_PLUGIN_DIR='$(abs_top_builddir)/tests/plugins/.libs'; export CRMM_TEST_PLUGIN_DIR; \
	CRMM_TEST_SRCDIR='$(abs_top_srcdir)/tests'; export CRMM_TEST_SRCDIR; \
	CK_DEFAULT_TIMEOUT=60; export CK_DEFAULT_TIMEOUT; \
	ASAN_OPTIONS="$${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1:allocator_may_return_null=1}"; export ASAN_OPTIONS; \
	unset CRMM_CONFIG CRMM_LOG_LEVEL;

check_PROGRAMS += tests/check_conformance_host
tests_check_conformance_host_SOURCES = tests/check_conformance_host.c
tests_check_conformance_host_CFLAGS = $(TEST_CFLAGS)
tests_check_conformance_host_LDADD = $(TEST_LDADD)
TESTS += tests/check_conformance_host

include tests/plugins/local.mk
include tests/core.mk
include tests/config.mk
include tests/loader.mk
include tests/gpu_basic.mk
include tests/streams_buffers.mk
include tests/pool.mk
include tests/graphs.mk
include tests/arena.mk
include tests/adaptors.mk
include tests/rmm_resources.mk
include tests/callback_views_system.mk
include tests/tools.mk
include tests/readme.mk
include tests/bench.mk
include tests/multi_gpu.mk
include tests/torch.mk
include tests/ipc.mk
include tests/plugin_common.mk
include tests/file_policy.mk
include tests/fork_exit.mk
