# tests/ipc.mk — sharing memory with another process (crmm/ipc.h): on the CPU against the
# scripted driver (fake_vmm.c defines CUDA functions, so the program is linked -export-dynamic),
# and on a GPU with two processes.
check_PROGRAMS += tests/check_ipc
tests_check_ipc_SOURCES = tests/check_ipc.c $(FAKE_VMM_SOURCES)
tests_check_ipc_CFLAGS = $(TEST_CFLAGS)
tests_check_ipc_LDFLAGS = -export-dynamic
tests_check_ipc_LDADD = $(TEST_LDADD)
TESTS += tests/check_ipc
check_PROGRAMS += tests/check_ipc_gpu
tests_check_ipc_gpu_SOURCES = tests/check_ipc_gpu.c
tests_check_ipc_gpu_CFLAGS = $(TEST_CFLAGS)
tests_check_ipc_gpu_LDADD = $(TEST_LDADD)
TESTS += tests/check_ipc_gpu
# a tool built with the tests and run by hand on a GPU: the rate of copying shared memory from
# another process against the same copy inside one process
check_PROGRAMS += tests/ipc_bandwidth
tests_ipc_bandwidth_SOURCES = tests/ipc_bandwidth.c
tests_ipc_bandwidth_CFLAGS = $(TEST_CFLAGS)
tests_ipc_bandwidth_LDADD = $(TEST_LDADD)
