# tests/config.mk — the INI config suite (no GPU needed). Its table of good and bad configs is
# tests/configs/*.ini, shared with tests/check_tools.sh.
check_PROGRAMS += tests/check_config
tests_check_config_SOURCES = tests/check_config.c
tests_check_config_CFLAGS = $(TEST_CFLAGS)
tests_check_config_LDADD = $(TEST_LDADD)
TESTS += tests/check_config
EXTRA_DIST += tests/configs

# configs of 100,000 resources, generated at run time (no GPU needed)
check_PROGRAMS += tests/check_config_scale
tests_check_config_scale_SOURCES = tests/check_config_scale.c
tests_check_config_scale_CFLAGS = $(TEST_CFLAGS)
tests_check_config_scale_LDADD = $(TEST_LDADD)
TESTS += tests/check_config_scale
TESTS += tests/check_tools_scale.sh
EXTRA_DIST += tests/check_tools_scale.sh

# Random configs through the real plugins: checked, built and used (tests/check_random_configs.c);
# `make check` runs 1000, .ci/run many more under ASan + UBSan ($CRMM_RANDOM_CONFIGS).
check_PROGRAMS += tests/check_random_configs
tests_check_random_configs_SOURCES = tests/check_random_configs.c
tests_check_random_configs_CFLAGS = $(TEST_CFLAGS)
tests_check_random_configs_LDADD = $(TEST_LDADD)
TESTS += tests/check_random_configs
