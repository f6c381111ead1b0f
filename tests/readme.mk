# tests/readme.mk — what a new user reads: the README's C code blocks compiled with pkg-config
# (crmm-uninstalled.pc) and run over its host config, its template plugin built out of tree and
# loaded (check_readme.sh); the man pages and the bash completion against the tool (check_docs.sh).
TESTS += tests/check_readme.sh
EXTRA_DIST += tests/check_readme.sh
AM_TESTS_ENVIRONMENT += \
	CRMM_TEST_CC='$(CC)'; export CRMM_TEST_CC; \
	CRMM_TEST_CFLAGS='-std=c11 -Wall -Wextra -Werror $(SANITIZER_CFLAGS)'; export CRMM_TEST_CFLAGS; \
	CRMM_TEST_LDFLAGS='$(SANITIZER_LDFLAGS)'; export CRMM_TEST_LDFLAGS;
# the man pages and the bash completion against the tool
TESTS += tests/check_docs.sh
EXTRA_DIST += tests/check_docs.sh
# .ci/run's install after a reconfigure to another prefix (a full build twice: not in make check)
EXTRA_DIST += tests/install_prefix_change.sh
