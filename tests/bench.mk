# tests/bench.mk — `crmm bench`: workload generator, runner, config skipping, the command line and --overhead
# (CPU); the raw CUDA references and the command over a GPU (GPU, exits 77 without one).
check_PROGRAMS += tests/check_bench tests/check_bench_gpu
tests_check_bench_SOURCES = tests/check_bench.c
tests_check_bench_CFLAGS = $(TEST_CFLAGS)
tests_check_bench_LDADD = $(BENCH_LIBS) $(TEST_LDADD) -lm
tests_check_bench_gpu_SOURCES = tests/check_bench_gpu.c
tests_check_bench_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_bench_gpu_LDADD = $(BENCH_LIBS) $(TEST_LDADD)
TESTS += tests/check_bench tests/check_bench_gpu
