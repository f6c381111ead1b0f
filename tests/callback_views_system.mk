# tests/callback_views_system.mk — the plugins for the rest of RMM's Python classes: callback
# (over host functions), cuda_async_view, async_managed, system and sam_headroom (over a scripted
# CUDA on the CPU; on a real device in the GPU program, which gates itself).
check_PROGRAMS += tests/check_callback tests/check_views_and_system_cpu tests/check_views_and_system_gpu
TESTS += tests/check_callback tests/check_views_and_system_cpu tests/check_views_and_system_gpu
tests_check_callback_SOURCES = tests/check_callback.c
tests_check_callback_CFLAGS = $(TEST_CFLAGS)
tests_check_callback_LDADD = $(TEST_LDADD)
# the program defines the CUDA calls the plugins make (-export-dynamic lets them land there)
tests_check_views_and_system_cpu_SOURCES = tests/check_views_and_system_cpu.c
tests_check_views_and_system_cpu_CFLAGS = $(TEST_CFLAGS)
tests_check_views_and_system_cpu_LDFLAGS = -export-dynamic
tests_check_views_and_system_cpu_LDADD = $(TEST_LDADD)
tests_check_views_and_system_gpu_SOURCES = tests/check_views_and_system_gpu.c
tests_check_views_and_system_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_views_and_system_gpu_LDADD = $(TEST_LDADD)
