/* malloc_fail_shim.c — an LD_PRELOAD library for tests/check_cli_malloc_failure.sh: it replaces
 * malloc and its family in the crmm program (and only there: other programs it is preloaded
 * into, such as the shell of libtool's wrapper, run untouched), counts every call, fails the
 * call numbered $CRMM_MALLOC_FAIL_AT (from 1; unset or 0: none), and counts blocks allocated
 * minus blocks freed. At exit it writes "calls N live L failed F" to $CRMM_MALLOC_REPORT: the
 * calls made, the blocks still held, and whether the failing call was reached. With
 * $CRMM_MALLOC_TRACE set, the failing call's stack is printed on stderr (to find what failed).
 *
 * The CUDA driver is kept out of the crmm program (its dlopen of libcuda fails, as on a machine
 * without a GPU): the sweep is about crmm's handling of a failed allocation, and the driver's own
 * start-up, whose allocations would be failed too, does not survive that (it crashed on an H200). */
#include "build_config.h" /* _GNU_SOURCE: program_invocation_short_name, RTLD_NEXT */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static bool armed;        /* set by the constructor in the crmm program */
static uint64_t fail_at;  /* 0: none */
static uint64_t calls;    /* atomic */
static int64_t live;      /* atomic: blocks allocated minus blocks freed */
static bool failed;
static bool trace;

static bool fail_now(void)
{
    if (!__atomic_load_n(&armed, __ATOMIC_RELAXED))
        return false;
    if (__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) != fail_at)
        return false;
    failed = true;
    if (trace) {
        void *frames[24];
        backtrace_symbols_fd(frames, backtrace(frames, 24), 2);
    }
    errno = ENOMEM;
    return true;
}

static void *counted(void *p, int64_t d)
{
    if (p)
        __atomic_add_fetch(&live, d, __ATOMIC_RELAXED);
    return p;
}

void *dlopen(const char *file, int mode)
{
    static void *(*next)(const char *, int);
    if (!next)
        *(void **)&next = dlsym(RTLD_NEXT, "dlopen");
    if (__atomic_load_n(&armed, __ATOMIC_RELAXED) && file && strstr(file, "libcuda.so"))
        return NULL;
    return next ? next(file, mode) : NULL;
}

#include "malloc_fail_family.h"

__attribute__((constructor)) static void shim_start(void)
{
    const char *name = program_invocation_short_name;
    if (strcmp(name, "crmm") != 0 && strcmp(name, "lt-crmm") != 0)
        return;
    const char *at = getenv("CRMM_MALLOC_FAIL_AT");
    fail_at = at ? strtoull(at, NULL, 10) : 0;
    trace = getenv("CRMM_MALLOC_TRACE") != NULL;
    __atomic_store_n(&armed, true, __ATOMIC_RELAXED);
}

/* Runs after the program's own exit handlers (a preloaded library is finalized last). */
__attribute__((destructor)) static void shim_report(void)
{
    if (!__atomic_load_n(&armed, __ATOMIC_RELAXED))
        return;
    __atomic_store_n(&armed, false, __ATOMIC_RELAXED);
    const char *path = getenv("CRMM_MALLOC_REPORT");
    if (!path)
        return;
    char line[128];
    int n = snprintf(line, sizeof line, "calls %llu live %lld failed %d\n", (unsigned long long)calls,
                     (long long)__atomic_load_n(&live, __ATOMIC_RELAXED), failed ? 1 : 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        if (n > 0 && write(fd, line, (size_t)n) != n)
            n = -1;
        close(fd);
    }
}
