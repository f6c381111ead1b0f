# tests/multi_gpu.mk — crmm on two GPUs: a config giving each device its own chain, pools and
# arenas of both devices used from eight threads at once, peer copies between the devices, and
# the caller's current device kept. Needs 2 GPUs (skips with exit 77 otherwise).
check_PROGRAMS += tests/check_multi_gpu_2gpu
TESTS += tests/check_multi_gpu_2gpu
tests_check_multi_gpu_2gpu_SOURCES = tests/check_multi_gpu_2gpu.c
tests_check_multi_gpu_2gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_multi_gpu_2gpu_LDADD = $(TEST_LDADD)
