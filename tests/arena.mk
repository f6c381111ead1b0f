# tests/arena.mk: the arena plugin over host memory (CPU), and over cuda (GPU; skips without one).
# check_arena links arena_slab.c to check the block-index arithmetic directly.
check_PROGRAMS += tests/check_arena tests/check_arena_gpu
tests_check_arena_SOURCES = tests/check_arena.c plugins/arena/arena_slab.c
tests_check_arena_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/arena $(SUPPORT_CPPFLAGS)
tests_check_arena_CFLAGS = $(TEST_CFLAGS)
tests_check_arena_LDADD = $(TEST_LDADD)
tests_check_arena_gpu_SOURCES = tests/check_arena_gpu.c
tests_check_arena_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_arena_gpu_LDADD = $(TEST_LDADD)
TESTS += tests/check_arena tests/check_arena_gpu
# the stream logic against a scripted CUDA: the program defines the CUDA calls the arena makes
# and exports them, so that the plugin's calls land there (runs without a GPU)
check_PROGRAMS += tests/check_arena_streams
tests_check_arena_streams_SOURCES = tests/check_arena_streams.c tests/fake_capture.c tests/fake_capture.h
tests_check_arena_streams_CFLAGS = $(TEST_CFLAGS)
tests_check_arena_streams_LDFLAGS = -export-dynamic
tests_check_arena_streams_LDADD = $(TEST_LDADD)
TESTS += tests/check_arena_streams
