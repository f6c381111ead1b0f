# tests/local.mk — every test of crmm, one line each.
#
# A Check program tests/NAME is built from tests/NAME.c and links LDADD (the shared helpers of
# tests/libcrmmtest.la, libcrmm and Check): listing it in one of the lists below is all it needs.
# Only a program with more sources, or one that exports CUDA functions of its own, adds a stanza
# further down. GPU programs gate themselves (exit 77 without a device unless
# CRMM_TEST_REQUIRE_GPU is set; *_2gpu ones need two).

# CPU suites
CPU_TESTS = \
	tests/check_core \
	tests/check_params \
	tests/check_conformance_host \
	tests/check_config \
	tests/check_config_init \
	tests/check_config_scale \
	tests/check_random_configs \
	tests/check_loader \
	tests/check_loader_files \
	tests/check_resource_abi \
	tests/check_streams_buffers \
	tests/check_pool \
	tests/check_pool_thread_cache \
	tests/check_pool_growth \
	tests/check_try_ops \
	tests/check_statistics \
	tests/check_limiting \
	tests/check_tracking \
	tests/check_adaptor_passthrough \
	tests/check_logging \
	tests/check_bad_frees \
	tests/check_fixed_size \
	tests/check_binning \
	tests/check_aligned \
	tests/check_failure_callback \
	tests/check_async_prefetch_cpu \
	tests/check_callback \
	tests/check_file_policy \
	tests/check_fork_exit \
	tests/check_fault_injection \
	tests/check_malloc_failure \
	tests/check_arena \
	tests/check_arena_shards \
	tests/check_arena_stress \
	tests/check_logging_line \
	tests/check_ptr_map \
	tests/check_replay \
	tests/check_plan_make \
	tests/check_bench_workload \
	tests/check_bench_cli \
	tests/check_bench_overhead

# GPU suites
GPU_TESTS = \
	tests/check_conformance_gpu \
	tests/check_registry_gpu \
	tests/check_exit_gpu \
	tests/check_streams_buffers_gpu \
	tests/check_device_buffer_gpu \
	tests/check_streams_buffers_2gpu \
	tests/check_pool_gpu \
	tests/check_graphs_gpu \
	tests/check_arena_gpu \
	tests/check_rmm_resources_gpu \
	tests/check_async_gpu \
	tests/check_prefetch_gpu \
	tests/check_views_and_system_gpu \
	tests/check_multi_gpu_2gpu \
	tests/check_ipc_gpu \
	tests/check_adaptors_gpu \
	tests/check_bench_gpu

# CPU suites against a scripted CUDA (tests/fakes/): the program defines CUDA calls and is linked
# -export-dynamic, so that the plugins' calls land in it instead of in libcudart
SCRIPTED_CUDA_TESTS = \
	tests/check_stream_order \
	tests/check_pool_streams \
	tests/check_pool_streams_threads \
	tests/check_arena_streams \
	tests/check_arena_streams_threads \
	tests/check_fixed_size_streams \
	tests/check_torch_allocator \
	tests/check_device_buffer_cuda_calls \
	tests/check_async_serialized \
	tests/check_ipc_async \
	tests/check_async_devices \
	tests/check_views_and_system_cpu \
	tests/check_pool_thread_cache_auto \
	tests/check_replay_streams \
	tests/check_pool_expandable \
	tests/check_pool_expandable_use \
	tests/check_pool_expandable_faults \
	tests/check_pool_page_moves \
	tests/check_pool_plan \
	tests/check_pool_serving \
	tests/check_graphs \
	tests/check_graphs_private \
	tests/check_graph_owners \
	tests/check_pool_invariants \
	tests/check_pool_thread_cache_races \
	tests/check_pool_stream_order \
	tests/check_graphs_plugins \
	tests/check_graphs_model \
	tests/check_ipc \
	tests/check_void_keeps_error \
	tests/check_fork_held_locks

# Scripts, run from the top build directory (where the program is ./tools/crmm)
SCRIPT_TESTS = \
	tests/check_exports.sh \
	tests/check_core_layers.sh \
	tests/check_tools.sh \
	tests/check_tools_scale.sh \
	tests/check_file_policy.sh \
	tests/check_cli_malloc_failure.sh \
	tests/check_pool_expandable_logs.sh \
	tests/check_pool_plan_logs.sh \
	tests/check_readme.sh \
	tests/check_docs.sh

# Development tools built with the tests and run by hand: the rate of copying memory shared with
# another process (GPU); an allocation log, and crmm bench's sets, through an expandable pool over
# the scripted driver, counting what the pool asks of the device
TOOLS_BUILT_WITH_TESTS = tests/ipc_bandwidth tests/pool_expandable_replay tests/pool_threads_sim

# crmm's hooks for PyTorch's graph pools, record_stream and allocation (python/crmm/_torch_graph_hooks.cpp), compiled with the
# C++ compiler configure found against stand-ins of the three PyTorch headers they include: no
# PyTorch, no GPU
CXX_TESTS =
if HAVE_HOOKS_CXX
CXX_TESTS += tests/check_torch_graph_hooks
tests/check_torch_graph_hooks: tests/check_torch_graph_hooks.cpp python/crmm/_torch_graph_hooks.cpp \
		include/crmm/graph_owner.h include/crmm/torch.h $(TORCH_STANDIN_FILES)
	$(AM_V_GEN)$(TORCH_CXX) $(TEST_CXXFLAGS) -O1 -g $(SANITIZER_CFLAGS) -I$(top_srcdir)/tests/torch_standin \
	  -I$(top_srcdir)/include -o $@ $(top_srcdir)/tests/check_torch_graph_hooks.cpp $(SANITIZER_LDFLAGS) -lpthread
endif
TORCH_STANDIN_FILES = tests/torch_standin/c10/cuda/CUDAStream.h \
	tests/torch_standin/torch/csrc/cuda/CUDAPluggableAllocator.h \
	tests/torch_standin/c10/util/Exception.h
check_SCRIPTS = $(CXX_TESTS)
CLEANFILES += tests/check_torch_graph_hooks
EXTRA_DIST += tests/check_torch_graph_hooks.cpp $(TORCH_STANDIN_FILES)

check_PROGRAMS += $(CPU_TESTS) $(GPU_TESTS) $(SCRIPTED_CUDA_TESTS) $(TOOLS_BUILT_WITH_TESTS)
TESTS += $(CPU_TESTS) $(GPU_TESTS) $(SCRIPTED_CUDA_TESTS) $(SCRIPT_TESTS) $(CXX_TESTS)
# .ci/run's install after a reconfigure to another prefix (a full build twice: not in make check)
EXTRA_DIST += $(SCRIPT_TESTS) tests/script_support.sh tests/install_prefix_change.sh tests/configs
# helpers that several programs of one plugin or part include
EXTRA_DIST += tests/core_test.h tests/config_test.h tests/loader_test.h tests/streams_test.h \
	tests/pool_test.h tests/pool_streams_test.h tests/pool_thread_cache_test.h tests/worker_test.h tests/pool_books_test.h tests/pool_expandable_test.h \
	tests/arena_test.h tests/arena_streams_test.h tests/graphs_test.h tests/streams_buffers_gpu_test.h tests/blocks_test.h
EXTRA_DIST += tests/block_pattern.h tests/gpu_streams_test.h tests/stream_gate_test.h

# ---- what every program shares ---------------------------------------------------------------
check_LTLIBRARIES += tests/libcrmmtest.la
tests_libcrmmtest_la_SOURCES = tests/test_support.c tests/test_support.h tests/conformance.c tests/conformance.h \
	tests/fakes/fake_streams.c tests/fakes/fake_streams.h tests/churn_support.c tests/churn_support.h \
	tests/over_host.c tests/over_host.h tests/peer_process.c tests/peer_process.h \
	tests/probe_resource.c tests/probe_resource.h tests/silent_resource.h
tests_libcrmmtest_la_CFLAGS = $(AM_CFLAGS)
tests_libcrmmtest_la_LIBADD = libcrmm.la $(CHECK_LIBS) $(CUDA_LIBS)

# The programs of this Makefile that set no LDADD of their own are the tests; Check's compile flags
# are what its pkg-config file asks of every program that includes <check.h>.
AM_CFLAGS += $(CHECK_CFLAGS)
# The tests use the public headers as a user of the installed crmm does, the plugins' with the
# core's. Every target outside tests/ names its own CPPFLAGS, so AM_CPPFLAGS serves the tests alone.
AM_CPPFLAGS += $(PLUGIN_PUBLIC_CPPFLAGS)
TEST_CFLAGS = $(AM_CFLAGS)
TEST_LDADD = tests/libcrmmtest.la libcrmm.la $(CHECK_LIBS) $(CUDA_LIBS) -lm
# what the programs that drive crmm bench's or crmm replay's code link
BENCH_LDADD = $(BENCH_LIBS) $(TEST_LDADD)
REPLAY_LDADD = $(REPLAY_LIBS) $(TEST_LDADD)
LDADD = $(TEST_LDADD)

# The scripted CUDA runtime's capture calls and the scripted driver (tests/fakes/). They define
# CUDA functions, so they are compiled into each program that uses them, never into libcrmmtest.
FAKE_CUDA_SOURCES = tests/fakes/fake_capture.c tests/fakes/fake_capture.h
# the runtime's stream order (ids, events, synchronization) and a fake device, for the stream suites
FAKE_STREAM_SOURCES = tests/fakes/fake_stream_cuda.c tests/fakes/fake_stream_cuda.h $(FAKE_CUDA_SOURCES)
FAKE_VMM_SOURCES = tests/fakes/fake_vmm.c tests/fakes/fake_vmm.h $(FAKE_CUDA_SOURCES)
# no driver behind a scripted runtime: every driver entry point is missing, as without a driver
FAKE_NO_DRIVER_SOURCES = tests/fakes/fake_no_driver.c
FAKE_MEMPOOL_SOURCES = tests/fakes/fake_mempool.c tests/fakes/fake_mempool.h
# `crmm replay` (tools/libcrmmreplay.la, in REPLAY_LDADD)
REPLAY_SOURCES = tools/replay.h tests/replay_logs.h

# ---- programs with more than tests/NAME.c ----------------------------------------------------
tests_check_stream_order_SOURCES = tests/check_stream_order.c $(FAKE_STREAM_SOURCES)
tests_check_pool_streams_SOURCES = tests/check_pool_streams.c $(FAKE_STREAM_SOURCES)
tests_check_pool_streams_threads_SOURCES = tests/check_pool_streams_threads.c $(FAKE_STREAM_SOURCES)
tests_check_arena_streams_SOURCES = tests/check_arena_streams.c $(FAKE_STREAM_SOURCES)
tests_check_arena_streams_threads_SOURCES = tests/check_arena_streams_threads.c $(FAKE_STREAM_SOURCES)
tests_check_fixed_size_streams_SOURCES = tests/check_fixed_size_streams.c $(FAKE_STREAM_SOURCES)
tests_check_torch_allocator_SOURCES = tests/check_torch_allocator.c $(FAKE_CUDA_SOURCES) $(FAKE_NO_DRIVER_SOURCES)
tests_check_async_serialized_SOURCES = tests/check_async_serialized.c $(FAKE_NO_DRIVER_SOURCES) $(FAKE_MEMPOOL_SOURCES)
tests_check_ipc_async_SOURCES = tests/check_ipc_async.c $(FAKE_MEMPOOL_SOURCES)
tests_check_async_devices_SOURCES = tests/check_async_devices.c $(FAKE_NO_DRIVER_SOURCES) $(FAKE_MEMPOOL_SOURCES)
tests_check_views_and_system_cpu_SOURCES = tests/check_views_and_system_cpu.c $(FAKE_NO_DRIVER_SOURCES)
tests_check_fork_held_locks_SOURCES = tests/check_fork_held_locks.c plugins/common/graph_hold.c \
	plugins/common/graph_hold.h plugins/common/graph_park.c plugins/common/graph_park.h \
	plugins/common/fork_guards.c plugins/common/fork_guards.h plugins/common/thread_serial.c \
	plugins/common/thread_serial.h $(FAKE_NO_DRIVER_SOURCES)
tests_check_device_buffer_cuda_calls_SOURCES = tests/check_device_buffer_cuda_calls.c $(FAKE_STREAM_SOURCES)
tests_check_void_keeps_error_SOURCES = tests/check_void_keeps_error.c tests/callback_config.h $(FAKE_STREAM_SOURCES)
tests_check_callback_SOURCES = tests/check_callback.c tests/callback_config.h
tests_check_pool_expandable_SOURCES = tests/check_pool_expandable.c $(FAKE_VMM_SOURCES)
tests_check_pool_expandable_use_SOURCES = tests/check_pool_expandable_use.c $(FAKE_VMM_SOURCES)
tests_check_pool_expandable_faults_SOURCES = tests/check_pool_expandable_faults.c $(FAKE_VMM_SOURCES)
tests_check_pool_page_moves_SOURCES = tests/check_pool_page_moves.c $(FAKE_VMM_SOURCES)
tests_check_pool_plan_SOURCES = tests/check_pool_plan.c $(FAKE_VMM_SOURCES)
tests_check_pool_serving_SOURCES = tests/check_pool_serving.c tests/serving_trace.c tests/serving_trace.h \
	$(FAKE_VMM_SOURCES)
tests_check_graphs_SOURCES = tests/check_graphs.c $(FAKE_VMM_SOURCES) tests/malloc_fail.c tests/malloc_fail.h
tests_check_graphs_private_SOURCES = tests/check_graphs_private.c $(FAKE_VMM_SOURCES) tests/malloc_fail.c tests/malloc_fail.h
tests_check_graph_owners_SOURCES = tests/check_graph_owners.c $(FAKE_VMM_SOURCES) tests/malloc_fail.c tests/malloc_fail.h
tests_check_pool_invariants_SOURCES = tests/check_pool_invariants.c $(FAKE_VMM_SOURCES) tests/malloc_fail.c tests/malloc_fail.h
tests_check_pool_thread_cache_races_SOURCES = tests/check_pool_thread_cache_races.c $(FAKE_VMM_SOURCES) tests/malloc_fail.c tests/malloc_fail.h
tests_check_pool_stream_order_SOURCES = tests/check_pool_stream_order.c $(FAKE_VMM_SOURCES) tests/malloc_fail.c tests/malloc_fail.h
tests_check_graphs_plugins_SOURCES = tests/check_graphs_plugins.c $(FAKE_VMM_SOURCES) tests/malloc_fail.c tests/malloc_fail.h
tests_check_graphs_model_SOURCES = tests/check_graphs_model.c $(FAKE_VMM_SOURCES) tests/malloc_fail.c tests/malloc_fail.h
tests_check_ipc_SOURCES = tests/check_ipc.c $(FAKE_VMM_SOURCES)
tests_pool_expandable_replay_SOURCES = tests/pool_expandable_replay.c tools/replay.h $(FAKE_VMM_SOURCES)
tests_pool_expandable_replay_LDADD = $(REPLAY_LDADD)
tests_pool_threads_sim_SOURCES = tests/pool_threads_sim.c $(FAKE_VMM_SOURCES)
tests_pool_threads_sim_LDADD = $(BENCH_LDADD)
# every CPU stack over crmm_failnth (fault injection), and crmm's own mallocs failing in turn
tests_check_fault_injection_SOURCES = tests/check_fault_injection.c tests/cpu_stacks.c tests/cpu_stacks.h
tests_check_malloc_failure_SOURCES = tests/check_malloc_failure.c tests/cpu_stacks.c tests/cpu_stacks.h \
	tests/malloc_fail.c tests/malloc_fail.h

# -export-dynamic for every scripted-CUDA program (check_pool_thread_cache_auto exports its sched_yield,
# which the pool's spin lock calls while it waits)
tests_check_stream_order_LDFLAGS = -export-dynamic
tests_check_pool_streams_LDFLAGS = -export-dynamic
tests_check_pool_streams_threads_LDFLAGS = -export-dynamic
tests_check_arena_streams_LDFLAGS = -export-dynamic
tests_check_arena_streams_threads_LDFLAGS = -export-dynamic
tests_check_fixed_size_streams_LDFLAGS = -export-dynamic
tests_check_torch_allocator_LDFLAGS = -export-dynamic
tests_check_device_buffer_cuda_calls_LDFLAGS = -export-dynamic
tests_check_async_serialized_LDFLAGS = -export-dynamic
tests_check_ipc_async_LDFLAGS = -export-dynamic
tests_check_async_devices_LDFLAGS = -export-dynamic
tests_check_views_and_system_cpu_LDFLAGS = -export-dynamic
tests_check_fork_held_locks_LDFLAGS = -export-dynamic
tests_check_fork_held_locks_CPPFLAGS = $(AM_CPPFLAGS) $(SUPPORT_CPPFLAGS)
tests_check_fork_held_locks_LDADD = support/libcrmmsupport.a $(TEST_LDADD)
tests_check_pool_thread_cache_auto_LDFLAGS = -export-dynamic
tests_check_replay_streams_LDFLAGS = -export-dynamic
tests_check_pool_expandable_LDFLAGS = -export-dynamic
tests_check_pool_expandable_use_LDFLAGS = -export-dynamic
tests_check_pool_expandable_faults_LDFLAGS = -export-dynamic
tests_check_pool_page_moves_LDFLAGS = -export-dynamic
tests_check_pool_plan_LDFLAGS = -export-dynamic
tests_check_pool_serving_LDFLAGS = -export-dynamic
tests_check_graphs_LDFLAGS = -export-dynamic
tests_check_graphs_private_LDFLAGS = -export-dynamic
tests_check_graph_owners_LDFLAGS = -export-dynamic
tests_check_pool_invariants_LDFLAGS = -export-dynamic
tests_check_pool_thread_cache_races_LDFLAGS = -export-dynamic
tests_check_pool_stream_order_LDFLAGS = -export-dynamic
tests_check_graphs_plugins_LDFLAGS = -export-dynamic
tests_check_graphs_model_LDFLAGS = -export-dynamic
tests_check_ipc_LDFLAGS = -export-dynamic
tests_check_void_keeps_error_LDFLAGS = -export-dynamic
tests_pool_expandable_replay_LDFLAGS = -export-dynamic
tests_pool_threads_sim_LDFLAGS = -export-dynamic

# parts of plugins compiled in (per-target flags keep these objects apart from the plugin's own),
# each program naming the folder of the private header it includes
tests_check_arena_SOURCES = tests/check_arena.c plugins/arena/arena_slab.c
tests_check_arena_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/arena $(SUPPORT_CPPFLAGS)
tests_check_arena_CFLAGS = $(TEST_CFLAGS)
tests_check_logging_line_SOURCES = tests/check_logging_line.c plugins/logging/logging_line.c plugins/logging/logging_line.h
tests_check_logging_line_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/logging
tests_check_logging_line_CFLAGS = $(TEST_CFLAGS)
# support/'s hash map and `crmm replay`, linked
tests_check_ptr_map_CPPFLAGS = $(AM_CPPFLAGS) $(SUPPORT_CPPFLAGS)
tests_check_ptr_map_LDADD = support/libcrmmsupport.a $(TEST_LDADD)
tests_check_replay_SOURCES = tests/check_replay.c $(REPLAY_SOURCES)
tests_check_plan_make_SOURCES = tests/check_plan_make.c tools/plan.h $(REPLAY_SOURCES)
tests_check_plan_make_LDADD = $(REPLAY_LDADD)
tests_check_replay_LDADD = $(REPLAY_LDADD)
tests_check_replay_streams_SOURCES = tests/check_replay_streams.c $(FAKE_CUDA_SOURCES) $(FAKE_NO_DRIVER_SOURCES) \
	$(REPLAY_SOURCES)
tests_check_replay_streams_LDADD = $(REPLAY_LDADD)
tests_check_adaptors_gpu_SOURCES = tests/check_adaptors_gpu.c $(REPLAY_SOURCES)
tests_check_adaptors_gpu_LDADD = $(REPLAY_LDADD)
# crmm bench's suites share the readers of its output
BENCH_TEST_SOURCES = tests/bench_cli_output.c tests/bench_cli_output.h
tests_check_bench_workload_SOURCES = tests/check_bench_workload.c $(BENCH_TEST_SOURCES)
tests_check_bench_workload_LDADD = $(BENCH_LDADD)
tests_check_bench_cli_SOURCES = tests/check_bench_cli.c $(BENCH_TEST_SOURCES)
tests_check_bench_cli_LDADD = $(BENCH_LDADD)
tests_check_bench_overhead_SOURCES = tests/check_bench_overhead.c $(BENCH_TEST_SOURCES)
tests_check_bench_overhead_LDADD = $(BENCH_LDADD)
tests_check_bench_gpu_LDADD = $(BENCH_LDADD)

# crmm run with each of its mallocs failing in turn (check_cli_malloc_failure.sh), through a
# preloaded malloc that fails the Nth call and counts blocks held at exit. `make check` runs every
# 4th allocation; .ci/run runs them all (CRMM_MALLOC_SWEEP_STEP=1).
check_LTLIBRARIES += tests/libmallocfail.la
tests_libmallocfail_la_SOURCES = tests/malloc_fail_shim.c tests/malloc_fail_family.h
tests_libmallocfail_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere

# ---- how the tests run -----------------------------------------------------------------------
# check_readme.sh compiles the README's C blocks with the build's compiler and sanitizers.
AM_TESTS_ENVIRONMENT = \
	CRMM_PLUGIN_PATH='$(abs_top_builddir)/plugins/built:$(abs_top_builddir)/tests/plugins/.libs'; export CRMM_PLUGIN_PATH; \
	CRMM_TEST_PLUGIN_DIR='$(abs_top_builddir)/tests/plugins/.libs'; export CRMM_TEST_PLUGIN_DIR; \
	CRMM_TEST_SRCDIR='$(abs_top_srcdir)/tests'; export CRMM_TEST_SRCDIR; \
	CK_DEFAULT_TIMEOUT=60; export CK_DEFAULT_TIMEOUT; \
	ASAN_OPTIONS="$${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1:allocator_may_return_null=1}"; export ASAN_OPTIONS; \
	CRMM_TEST_CC='$(CC)'; export CRMM_TEST_CC; \
	CRMM_TEST_CFLAGS='-std=c11 -Wall -Wextra -Werror $(SANITIZER_CFLAGS)'; export CRMM_TEST_CFLAGS; \
	CRMM_TEST_LDFLAGS='$(SANITIZER_LDFLAGS)'; export CRMM_TEST_LDFLAGS; \
	unset CRMM_CONFIG CRMM_LOG_LEVEL;

include tests/plugins/local.mk
