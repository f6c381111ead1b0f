# tests/graphs.mk — allocators under CUDA graph capture: against a scripted CUDA (CPU; the program
# defines the CUDA calls and exports them, so that the plugins' calls land there) and on a GPU.
check_PROGRAMS += tests/check_graphs
tests_check_graphs_SOURCES = tests/check_graphs.c $(FAKE_VMM_SOURCES) tests/malloc_fail.c tests/malloc_fail.h
tests_check_graphs_CFLAGS = $(TEST_CFLAGS)
tests_check_graphs_LDFLAGS = -export-dynamic
tests_check_graphs_LDADD = $(TEST_LDADD)
TESTS += tests/check_graphs
check_PROGRAMS += tests/check_graphs_gpu
tests_check_graphs_gpu_SOURCES = tests/check_graphs_gpu.c
tests_check_graphs_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_graphs_gpu_LDADD = $(TEST_LDADD)
TESTS += tests/check_graphs_gpu
