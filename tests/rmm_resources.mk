# tests/rmm_resources.mk — the rest of RMM's resource set: async, binning, fixed_size, aligned,
# failure_callback, prefetch.
# CPU programs run over host memory (and the test-only `budget` plugin); GPU programs gate
# themselves and run over cuda, managed and async.
RMM_RESOURCES_CPU_TESTS = \
	tests/check_fixed_size \
	tests/check_binning \
	tests/check_aligned \
	tests/check_failure_callback \
	tests/check_async_prefetch_cpu
RMM_RESOURCES_GPU_TESTS = \
	tests/check_rmm_resources_gpu \
	tests/check_async_gpu \
	tests/check_prefetch_gpu
check_PROGRAMS += $(RMM_RESOURCES_CPU_TESTS) $(RMM_RESOURCES_GPU_TESTS)
TESTS += $(RMM_RESOURCES_CPU_TESTS) $(RMM_RESOURCES_GPU_TESTS)

tests_check_fixed_size_SOURCES = tests/check_fixed_size.c
tests_check_fixed_size_CFLAGS = $(TEST_CFLAGS)
tests_check_fixed_size_LDADD = $(TEST_LDADD)
# fixed_size's stream order against a scripted CUDA (the program defines the CUDA calls)
check_PROGRAMS += tests/check_fixed_size_streams
tests_check_fixed_size_streams_SOURCES = tests/check_fixed_size_streams.c tests/fake_capture.c tests/fake_capture.h
tests_check_fixed_size_streams_CFLAGS = $(TEST_CFLAGS)
tests_check_fixed_size_streams_LDFLAGS = -export-dynamic
tests_check_fixed_size_streams_LDADD = $(TEST_LDADD)
TESTS += tests/check_fixed_size_streams
tests_check_binning_SOURCES = tests/check_binning.c
tests_check_binning_CFLAGS = $(TEST_CFLAGS)
tests_check_binning_LDADD = $(TEST_LDADD)
tests_check_aligned_SOURCES = tests/check_aligned.c
tests_check_aligned_CFLAGS = $(TEST_CFLAGS)
tests_check_aligned_LDADD = $(TEST_LDADD)
tests_check_failure_callback_SOURCES = tests/check_failure_callback.c
tests_check_failure_callback_CFLAGS = $(TEST_CFLAGS)
tests_check_failure_callback_LDADD = $(TEST_LDADD)
# async's serialize_calls against a scripted CUDA (the program defines the CUDA calls)
check_PROGRAMS += tests/check_async_serialized
tests_check_async_serialized_SOURCES = tests/check_async_serialized.c
tests_check_async_serialized_CFLAGS = $(TEST_CFLAGS)
tests_check_async_serialized_LDFLAGS = -export-dynamic
tests_check_async_serialized_LDADD = $(TEST_LDADD)
TESTS += tests/check_async_serialized
tests_check_async_prefetch_cpu_SOURCES = tests/check_async_prefetch_cpu.c
tests_check_async_prefetch_cpu_CFLAGS = $(TEST_CFLAGS)
tests_check_async_prefetch_cpu_LDADD = $(TEST_LDADD)

tests_check_rmm_resources_gpu_SOURCES = tests/check_rmm_resources_gpu.c
tests_check_rmm_resources_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_rmm_resources_gpu_LDADD = $(TEST_LDADD)
tests_check_async_gpu_SOURCES = tests/check_async_gpu.c
tests_check_async_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_async_gpu_LDADD = $(TEST_LDADD)
tests_check_prefetch_gpu_SOURCES = tests/check_prefetch_gpu.c
tests_check_prefetch_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_prefetch_gpu_LDADD = $(TEST_LDADD)
