/* core_test.h — what the core suites (check_core, check_params) share: a fresh temporary
 * directory per test, and an assertion on crmm's last error message. */
#ifndef CRMM_TESTS_CORE_TEST_H
#define CRMM_TESTS_CORE_TEST_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "plugins/paramtest_plugin.h"
#include "test_support.h"

static char tmpdir[4096];

static inline void make_tmpdir(void)
{
    char *d = crmm_test_tmpdir();
    ck_assert_ptr_nonnull(d);
    snprintf(tmpdir, sizeof tmpdir, "%s", d);
    free(d);
}

#define ck_assert_error_contains(sub) \
    ck_assert_msg(strstr(crmm_last_error(), (sub)) != NULL, "error '%s' lacks '%s'", crmm_last_error(), (sub))


#endif
