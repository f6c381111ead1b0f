# tests/pool.mk — the pool plugin: over host and a scripted upstream (CPU), over cuda (GPU).
check_PROGRAMS += tests/check_pool tests/check_pool_gpu
tests_check_pool_SOURCES = tests/check_pool.c
tests_check_pool_CFLAGS = $(TEST_CFLAGS)
tests_check_pool_LDADD = $(TEST_LDADD)
tests_check_pool_gpu_SOURCES = tests/check_pool_gpu.c
tests_check_pool_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_pool_gpu_LDADD = $(TEST_LDADD)
TESTS += tests/check_pool tests/check_pool_gpu
# the stream logic against a scripted CUDA: the program defines the CUDA calls the pool makes
# and exports them, so that the plugin's calls land there (runs without a GPU)
check_PROGRAMS += tests/check_pool_streams
tests_check_pool_streams_SOURCES = tests/check_pool_streams.c tests/fake_capture.c tests/fake_capture.h
tests_check_pool_streams_CFLAGS = $(TEST_CFLAGS)
tests_check_pool_streams_LDFLAGS = -export-dynamic
tests_check_pool_streams_LDADD = $(TEST_LDADD)
TESTS += tests/check_pool_streams
# the expandable pool against a scripted CUDA driver (runs without a GPU); the driver, in
# fake_vmm.c, defines CUDA functions, so it is compiled into each program that uses it (and
# exported), never into libcrmmtest
FAKE_VMM_SOURCES = tests/fake_vmm.c tests/fake_vmm.h tests/fake_capture.c tests/fake_capture.h
check_PROGRAMS += tests/check_pool_expandable
tests_check_pool_expandable_SOURCES = tests/check_pool_expandable.c $(FAKE_VMM_SOURCES)
tests_check_pool_expandable_CFLAGS = $(TEST_CFLAGS)
tests_check_pool_expandable_LDFLAGS = -export-dynamic
tests_check_pool_expandable_LDADD = $(TEST_LDADD)
TESTS += tests/check_pool_expandable
# a development tool, built with the tests and not run by them: replays an allocation log through
# an expandable pool over the scripted driver and counts what the pool asks of the device per pass
check_PROGRAMS += tests/pool_expandable_replay
tests_pool_expandable_replay_SOURCES = tests/pool_expandable_replay.c tools/replay.h $(FAKE_VMM_SOURCES)
tests_pool_expandable_replay_CFLAGS = $(TEST_CFLAGS)
tests_pool_expandable_replay_LDFLAGS = -export-dynamic
tests_pool_expandable_replay_LDADD = $(REPLAY_LIBS) $(TEST_LDADD)
# a development tool, built with the tests and not run by them: crmm bench's sets on an expandable
# pool over the scripted driver, with what the pool asked of the device per run
check_PROGRAMS += tests/pool_threads_sim
tests_pool_threads_sim_SOURCES = tests/pool_threads_sim.c $(FAKE_VMM_SOURCES)
tests_pool_threads_sim_CFLAGS = $(TEST_CFLAGS)
tests_pool_threads_sim_LDFLAGS = -export-dynamic
tests_pool_threads_sim_LDADD = $(BENCH_LIBS) $(TEST_LDADD)
# that tool over the recorded logs: memory against the peak, and what a warm repeat costs
TESTS += tests/check_pool_expandable_logs.sh
EXTRA_DIST += tests/check_pool_expandable_logs.sh

# the per-thread caches over host memory (runs without a GPU); the program defines sched_yield,
# which the pool's spin lock calls while it waits, and exports it so that the plugin's call lands
# there
check_PROGRAMS += tests/check_pool_thread_cache
tests_check_pool_thread_cache_SOURCES = tests/check_pool_thread_cache.c
tests_check_pool_thread_cache_CFLAGS = $(TEST_CFLAGS)
tests_check_pool_thread_cache_LDFLAGS = -export-dynamic
tests_check_pool_thread_cache_LDADD = $(TEST_LDADD)
TESTS += tests/check_pool_thread_cache
# an inference server's allocations through the expandable pool over the scripted driver: what a
# decode step asks of the device (runs without a GPU)
check_PROGRAMS += tests/check_pool_serving
tests_check_pool_serving_SOURCES = tests/check_pool_serving.c tests/serving_trace.c tests/serving_trace.h $(FAKE_VMM_SOURCES)
tests_check_pool_serving_CFLAGS = $(TEST_CFLAGS)
tests_check_pool_serving_LDFLAGS = -export-dynamic
tests_check_pool_serving_LDADD = $(TEST_LDADD)
TESTS += tests/check_pool_serving
