# tests/ipc.mk — sharing memory with another process (crmm/ipc.h): on the CPU against the
# scripted driver (fake_vmm.c defines CUDA functions, so the program is linked -export-dynamic),
# and on a GPU with two processes.
check_PROGRAMS += tests/check_ipc
tests_check_ipc_SOURCES = tests/check_ipc.c $(FAKE_VMM_SOURCES)
tests_check_ipc_CFLAGS = $(TEST_CFLAGS)
tests_check_ipc_LDFLAGS = -export-dynamic
tests_check_ipc_LDADD = $(TEST_LDADD)
TESTS += tests/check_ipc
