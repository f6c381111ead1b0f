/* check_malloc_failure.c — crmm's own host mallocs failing: this program defines malloc,
 * calloc, realloc and the aligned allocators itself (so they replace the C library's for every
 * library it loads, libcrmm and the plugins included) and fails the Nth call of a window it
 * opens around one scenario. Each scenario (building a stack over host and using it, loading a
 * config and building from it) is run with the failure at every index it reaches: each run must
 * end in errors, not crashes, with every host block given back. Sanitizer builds replace malloc
 * themselves, so there this program says so and skips (exit 77). */
#include "config.h"
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_stacks.h"
#include "test_support.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define REPLACES_MALLOC 0
#else
#define REPLACES_MALLOC 1
#endif

#if REPLACES_MALLOC
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);
void *memalign(size_t align, size_t n);

static bool armed;          /* counting calls */
static uint64_t fail_at;    /* the call that fails (from 1); 0: none */
static uint64_t calls;      /* atomic */

static bool fail_now(void)
{
    if (!__atomic_load_n(&armed, __ATOMIC_RELAXED))
        return false;
    if (__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) != fail_at)
        return false;
    errno = ENOMEM;
    return true;
}

void *malloc(size_t n) { return fail_now() ? NULL : __libc_malloc(n); }
void *calloc(size_t n, size_t size) { return fail_now() ? NULL : __libc_calloc(n, size); }
void *realloc(void *p, size_t n) { return fail_now() ? NULL : __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t align, size_t n) { return fail_now() ? NULL : __libc_memalign(align, n); }
void *aligned_alloc(size_t align, size_t n) { return fail_now() ? NULL : __libc_memalign(align, n); }
int posix_memalign(void **out, size_t align, size_t n)
{
    if (fail_now())
        return ENOMEM;
    void *p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

static void arm(uint64_t n)
{
    fail_at = n;
    __atomic_store_n(&calls, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&armed, true, __ATOMIC_RELAXED);
}

static uint64_t disarm(void)
{
    __atomic_store_n(&armed, false, __ATOMIC_RELAXED);
    return __atomic_load_n(&calls, __ATOMIC_RELAXED);
}

#define NSTACKS cpu_stack_count

static const size_t sizes[] = {100, 4096, 70000, 300, 1 << 18, 64};

/* Frees refused while the window was open. No ck_assert runs in the window: Check's own
 * messages allocate, and Check exits when that fails. */
static unsigned refused_frees;

/* Use `top`: allocations (which may fail), their frees, a trim. */
static void exercise(crmm_resource *top)
{
    void *p[12];
    size_t n[12];
    for (int i = 0; i < 12; i++) {
        n[i] = sizes[i % 6];
        if (crmm_resource_allocate(top, n[i], NULL, &p[i]) != CRMM_OK)
            p[i] = NULL;
    }
    for (int i = 0; i < 12; i++)
        if (p[i] && crmm_resource_deallocate(top, p[i], n[i], NULL) != CRMM_OK)
            refused_frees++;
    crmm_resource_trim(top);
}

/* Scenario `s` (a stack, or NSTACKS: a config) over `host`. */
static void scenario(size_t s, crmm_resource *host)
{
    if (s == NSTACKS) {
        crmm_config *cfg;
        if (crmm_config_load_string("[resource.h]\nplugin = host\n[resource.p]\nplugin = pool\nupstream = h\n"
                                    "initial_size = 1MiB\n[resource.s]\nplugin = statistics\nupstream = p\n",
                                    "malloc-failure", &cfg) != CRMM_OK)
            return;
        crmm_resource *mr;
        if (crmm_config_create_resource(cfg, "s", -1, &mr) == CRMM_OK) {
            exercise(mr);
            crmm_resource_release(mr);
        }
        crmm_config_free(cfg);
        return;
    }
    crmm_resource *layers[CPU_STACK_LAYERS];
    crmm_resource *top = cpu_stack_build(s, host, layers);
    if (top)
        exercise(top);
    cpu_stack_release(layers);
}

START_TEST(every_failing_malloc_is_survived)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    scenario((size_t)_i, host); /* once unarmed: plugins loaded, per-thread buffers made */
    arm(0);
    scenario((size_t)_i, host);
    uint64_t count = disarm();
    ck_assert_uint_gt(count, 0);
    crmm_test_log_capture_begin(); /* failures are reported on the log too */
    for (uint64_t k = 1; k <= count; k++) {
        arm(k);
        scenario((size_t)_i, host);
        disarm();
        ck_assert_msg(refused_frees == 0, "%s, malloc %llu failing: a free was refused",
                      _i < (int)NSTACKS ? cpu_stacks[_i].name : "config", (unsigned long long)k);
        ck_assert_msg(crmm_test_query(host, CRMM_QUERY_BYTES_IN_USE) == 0,
                      "%s, malloc %llu failing: host blocks not given back", _i < (int)NSTACKS ? cpu_stacks[_i].name : "config",
                      (unsigned long long)k);
    }
    free(crmm_test_log_capture_end());
    fprintf(stderr, "malloc failure: %s: %llu mallocs, %llu runs\n", _i < (int)NSTACKS ? cpu_stacks[_i].name : "config",
            (unsigned long long)count, (unsigned long long)count + 1);
    crmm_resource_release(host);
}
END_TEST

/* The replacement does fail: the Nth call returns NULL. */
START_TEST(the_nth_malloc_fails)
{
    arm(2);
    void *a = malloc(16), *b = malloc(16), *c = malloc(16);
    disarm();
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(c);
    free(a);
    free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("malloc_failure");
    TCase *tc = tcase_create("malloc_failure");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, the_nth_malloc_fails);
    tcase_add_loop_test(tc, every_failing_malloc_is_survived, 0, (int)NSTACKS + 1);
    suite_add_tcase(s, tc);
    return crmm_test_run(s);
}
#else
int main(void)
{
    fprintf(stderr, "check_malloc_failure: skipped: a sanitizer build replaces malloc itself\n");
    return 77;
}
#endif
