# tests/loader.mk — the plugin loader (with the broken plugins of tests/plugins/bad_plugin.c) and
# the resource ABI's basics over the host plugin; CPU only.
check_PROGRAMS += tests/check_loader
tests_check_loader_SOURCES = tests/check_loader.c
tests_check_loader_CFLAGS = $(TEST_CFLAGS)
tests_check_loader_LDADD = $(TEST_LDADD)
TESTS += tests/check_loader
