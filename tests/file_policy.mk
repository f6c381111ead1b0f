# tests/file_policy.mk — how crmm writes files and what a privileged process ignores (no GPU):
# the library's outputs in a Check program that defines secure_getenv (so a test can pretend to
# be privileged), `crmm replay --plot` and check-config in a script.
check_PROGRAMS += tests/check_file_policy
tests_check_file_policy_SOURCES = tests/check_file_policy.c
tests_check_file_policy_CFLAGS = $(TEST_CFLAGS)
tests_check_file_policy_LDADD = $(TEST_LDADD)
TESTS += tests/check_file_policy tests/check_file_policy.sh
EXTRA_DIST += tests/check_file_policy.sh
