/* core_test.h — the headers the core suites (check_core, check_params) include. */
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

#endif
