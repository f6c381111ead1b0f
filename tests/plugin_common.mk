# Tests of the plugins' support library (plugins/common), built from its sources directly.
check_PROGRAMS += tests/check_ptr_map
tests_check_ptr_map_SOURCES = tests/check_ptr_map.c $(PTR_MAP_SOURCES)
tests_check_ptr_map_CFLAGS = $(TEST_CFLAGS)
tests_check_ptr_map_LDADD = $(TEST_LDADD)
TESTS += tests/check_ptr_map
