# tests/fork_exit.mk — fork() while threads allocate, and exit() while threads allocate, over
# host memory (stress tests with a bounded count of child processes; run without a GPU)
check_PROGRAMS += tests/check_fork_exit
tests_check_fork_exit_SOURCES = tests/check_fork_exit.c
tests_check_fork_exit_CFLAGS = $(TEST_CFLAGS)
tests_check_fork_exit_LDADD = $(TEST_LDADD)
TESTS += tests/check_fork_exit
