/* malloc_fail.h — malloc failing on demand, for test programs: a program that links
 * malloc_fail.c defines malloc, calloc, realloc, free and the aligned allocators itself (so they
 * replace the C library's for every library it loads, libcrmm and the plugins included) and fails
 * the Nth call after malloc_fail_arm(N). Sanitizer builds replace malloc themselves: there
 * MALLOC_FAIL_REPLACES is 0, nothing is replaced, and a test that needs failures skips. */
#ifndef CRMM_TESTS_MALLOC_FAIL_H
#define CRMM_TESTS_MALLOC_FAIL_H

#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MALLOC_FAIL_REPLACES 0
#else
#define MALLOC_FAIL_REPLACES 1
#endif

/* Start counting calls from 0 and blocks live from 0; the call numbered n (from 1) fails, and so
 * does every later one when `and_after` (0: none fails). */
void malloc_fail_arm_from(uint64_t n, int and_after);
/* malloc_fail_arm_from(n, 0): only the Nth call fails. */
void malloc_fail_arm(uint64_t n);
/* Stop failing and counting; the calls made while armed. */
uint64_t malloc_fail_disarm(void);
/* Blocks allocated minus blocks freed while armed: a scenario that gives back all it took ends
 * at 0. */
int64_t malloc_fail_live(void);

#endif
