# tests/core.mk — errors, logger, size parsing and plugin parameters (no GPU needed).
check_PROGRAMS += tests/check_core
tests_check_core_SOURCES = tests/check_core.c
tests_check_core_CFLAGS = $(TEST_CFLAGS)
tests_check_core_LDADD = $(TEST_LDADD)
TESTS += tests/check_core

# libcrmm.so exports exactly the CRMM_API functions of include/crmm/*.h (a script over nm -D)
TESTS += tests/check_exports.sh
EXTRA_DIST += tests/check_exports.sh
# no #include or call loop among the core's files, no plugin header in the core
TESTS += tests/check_core_layers.sh
EXTRA_DIST += tests/check_core_layers.sh
