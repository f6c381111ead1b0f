# tests/tools.mk — the crmm program: check-config over tests/configs/, --help, info (no GPU).
# A script: automake runs it from the top build directory, where the program is ./tools/crmm
# (in a VPATH build too; the script itself is then found in the source tree).
TESTS += tests/check_tools.sh
EXTRA_DIST += tests/check_tools.sh

# The crmm program with each of its mallocs failing in turn (tests/check_cli_malloc_failure.sh),
# through a preloaded malloc that fails the Nth call and counts blocks held at exit. `make check`
# runs every 4th allocation; .ci/run runs them all (CRMM_MALLOC_SWEEP_STEP=1).
check_LTLIBRARIES += tests/libmallocfail.la
tests_libmallocfail_la_SOURCES = tests/malloc_fail_shim.c
tests_libmallocfail_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
TESTS += tests/check_cli_malloc_failure.sh
EXTRA_DIST += tests/check_cli_malloc_failure.sh
