# tests/config.mk — the INI config suite (no GPU needed). Its table of good and bad configs is
# tests/configs/*.ini, shared with tests/check_tools.sh.
check_PROGRAMS += tests/check_config
tests_check_config_SOURCES = tests/check_config.c
tests_check_config_CFLAGS = $(TEST_CFLAGS)
tests_check_config_LDADD = $(TEST_LDADD)
TESTS += tests/check_config
EXTRA_DIST += tests/configs
