# Tests of the address-keyed hash map (support/ptr_map.h).
check_PROGRAMS += tests/check_ptr_map
tests_check_ptr_map_SOURCES = tests/check_ptr_map.c
tests_check_ptr_map_CPPFLAGS = $(AM_CPPFLAGS) $(SUPPORT_CPPFLAGS)
tests_check_ptr_map_CFLAGS = $(TEST_CFLAGS)
tests_check_ptr_map_LDADD = support/libcrmmsupport.la $(TEST_LDADD)
TESTS += tests/check_ptr_map
