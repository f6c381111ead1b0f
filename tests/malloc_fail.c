/* malloc_fail.c — see malloc_fail.h. */
#include "build_config.h"
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include "malloc_fail.h"

#if MALLOC_FAIL_REPLACES
static bool armed;          /* counting calls */
static uint64_t fail_at;    /* the call that fails (from 1); 0: none */
static bool fail_after;     /* every call after fail_at fails too */
static uint64_t calls;      /* atomic */
static int64_t live;        /* atomic */

static bool fail_now(void)
{
    if (!__atomic_load_n(&armed, __ATOMIC_RELAXED))
        return false;
    uint64_t n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    if (!fail_at || (fail_after ? n < fail_at : n != fail_at))
        return false;
    errno = ENOMEM;
    return true;
}

static void *counted(void *p, int64_t d)
{
    if (p && __atomic_load_n(&armed, __ATOMIC_RELAXED))
        __atomic_add_fetch(&live, d, __ATOMIC_RELAXED);
    return p;
}

#include "malloc_fail_family.h"

void malloc_fail_arm_from(uint64_t n, int and_after)
{
    fail_at = n;
    fail_after = and_after != 0;
    __atomic_store_n(&calls, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&live, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&armed, true, __ATOMIC_RELAXED);
}

void malloc_fail_arm(uint64_t n) { malloc_fail_arm_from(n, 0); }

uint64_t malloc_fail_disarm(void)
{
    __atomic_store_n(&armed, false, __ATOMIC_RELAXED);
    return __atomic_load_n(&calls, __ATOMIC_RELAXED);
}

int64_t malloc_fail_live(void) { return __atomic_load_n(&live, __ATOMIC_RELAXED); }
#else
void malloc_fail_arm_from(uint64_t n, int and_after) { (void)n, (void)and_after; }
void malloc_fail_arm(uint64_t n) { (void)n; }
uint64_t malloc_fail_disarm(void) { return 0; }
int64_t malloc_fail_live(void) { return 0; }
#endif
