# Tests of the adaptor plugins (logging, statistics, tracking, limiting), the logging switch
# and `crmm replay`. CPU programs run over the host plugin; check_adaptors_gpu needs a GPU.
check_PROGRAMS += tests/check_statistics
tests_check_statistics_SOURCES = tests/check_statistics.c
tests_check_statistics_CFLAGS = $(TEST_CFLAGS)
tests_check_statistics_LDADD = $(TEST_LDADD)
TESTS += tests/check_statistics

check_PROGRAMS += tests/check_limiting
tests_check_limiting_SOURCES = tests/check_limiting.c
tests_check_limiting_CFLAGS = $(TEST_CFLAGS)
tests_check_limiting_LDADD = $(TEST_LDADD)
TESTS += tests/check_limiting

check_PROGRAMS += tests/check_tracking
tests_check_tracking_SOURCES = tests/check_tracking.c
tests_check_tracking_CFLAGS = $(TEST_CFLAGS)
tests_check_tracking_LDADD = $(TEST_LDADD)
TESTS += tests/check_tracking

# trim and queries passing through each adaptor to a pool under it
check_PROGRAMS += tests/check_adaptor_passthrough
tests_check_adaptor_passthrough_SOURCES = tests/check_adaptor_passthrough.c
tests_check_adaptor_passthrough_CFLAGS = $(TEST_CFLAGS)
tests_check_adaptor_passthrough_LDADD = $(TEST_LDADD)
TESTS += tests/check_adaptor_passthrough

check_PROGRAMS += tests/check_logging
tests_check_logging_SOURCES = tests/check_logging.c
tests_check_logging_CFLAGS = $(TEST_CFLAGS)
tests_check_logging_LDADD = $(TEST_LDADD)
TESTS += tests/check_logging

# the logging plugin's line formatter, compiled in
check_PROGRAMS += tests/check_logging_line
tests_check_logging_line_SOURCES = tests/check_logging_line.c plugins/logging/logging_line.c plugins/logging/logging_line.h
tests_check_logging_line_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/logging
tests_check_logging_line_CFLAGS = $(TEST_CFLAGS)
tests_check_logging_line_LDADD = $(TEST_LDADD)
TESTS += tests/check_logging_line

# `crmm replay`, called in-process; check_replay_streams scripts CUDA (its program defines the
# stream calls and exports them) and traces the calls the crmm_recorder plugin gets
REPLAY_SOURCES = tools/replay.h
REPLAY_LDADD = $(REPLAY_LIBS) $(TEST_LDADD)
check_PROGRAMS += tests/check_replay
tests_check_replay_SOURCES = tests/check_replay.c $(REPLAY_SOURCES)
tests_check_replay_CFLAGS = $(TEST_CFLAGS)
tests_check_replay_LDADD = $(REPLAY_LDADD)
TESTS += tests/check_replay
check_PROGRAMS += tests/check_replay_streams
tests_check_replay_streams_SOURCES = tests/check_replay_streams.c tests/fake_capture.c tests/fake_capture.h $(REPLAY_SOURCES)
tests_check_replay_streams_CFLAGS = $(TEST_CFLAGS)
tests_check_replay_streams_LDFLAGS = -export-dynamic
tests_check_replay_streams_LDADD = $(REPLAY_LDADD)
TESTS += tests/check_replay_streams

# The adaptors over cuda, the logging switch, replay on a device (exit 77 without a GPU)
check_PROGRAMS += tests/check_adaptors_gpu
tests_check_adaptors_gpu_SOURCES = tests/check_adaptors_gpu.c $(REPLAY_SOURCES)
tests_check_adaptors_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_adaptors_gpu_LDADD = $(REPLAY_LDADD)
TESTS += tests/check_adaptors_gpu

check_PROGRAMS += tests/check_bad_frees
tests_check_bad_frees_SOURCES = tests/check_bad_frees.c
tests_check_bad_frees_CFLAGS = $(TEST_CFLAGS)
tests_check_bad_frees_LDADD = $(TEST_LDADD)
TESTS += tests/check_bad_frees

# Fault injection: every CPU stack over crmm_failnth, failing each upstream allocation in turn.
check_PROGRAMS += tests/check_fault_injection
tests_check_fault_injection_SOURCES = tests/check_fault_injection.c tests/cpu_stacks.c tests/cpu_stacks.h
tests_check_fault_injection_CFLAGS = $(TEST_CFLAGS)
tests_check_fault_injection_LDADD = $(TEST_LDADD)
TESTS += tests/check_fault_injection

# Malloc failure: crmm's own host mallocs failing at every index, over the same CPU stacks.
check_PROGRAMS += tests/check_malloc_failure
tests_check_malloc_failure_SOURCES = tests/check_malloc_failure.c tests/cpu_stacks.c tests/cpu_stacks.h \
	tests/malloc_fail.c tests/malloc_fail.h
tests_check_malloc_failure_CFLAGS = $(TEST_CFLAGS)
tests_check_malloc_failure_LDADD = $(TEST_LDADD)
TESTS += tests/check_malloc_failure
