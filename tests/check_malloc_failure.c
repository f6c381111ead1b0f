/* check_malloc_failure.c — crmm's own host mallocs failing: this program links malloc_fail.c,
 * whose malloc, calloc, realloc and aligned allocators replace the C library's for every library
 * it loads (libcrmm and the plugins included), and fails the Nth call of a window it opens
 * around one scenario. Each scenario (building a stack over host and using it, loading a
 * config and building from it) is run with the failure at every index it reaches: each run must
 * end in errors, not crashes, with every host block given back. Sanitizer builds replace malloc
 * themselves, so there this program says so and skips (exit 77). */
#include "build_config.h"
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_stacks.h"
#include "test_support.h"
#include "malloc_fail.h"

#if MALLOC_FAIL_REPLACES
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

START_TEST(every_failing_malloc_is_survived) /* one run per stack and the config: registered in main */
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    scenario((size_t)_i, host); /* once unarmed: plugins loaded, per-thread buffers made */
    malloc_fail_arm(0);
    scenario((size_t)_i, host);
    uint64_t count = malloc_fail_disarm();
    ck_assert_uint_gt(count, 0);
    crmm_test_log_capture_begin(); /* failures are reported on the log too */
    for (uint64_t k = 1; k <= count; k++) {
        malloc_fail_arm(k);
        scenario((size_t)_i, host);
        malloc_fail_disarm();
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

/* Load `text` with the Nth malloc failing, for every N the load reaches. Each load ends in OK
 * (a failure it can do without, such as a cache entry) or in an error that says memory ran out
 * (or, when `refusal` is given, the config's own error): never a crash, and every block taken
 * is given back. A config that is refused (`refusal`) is never loaded as good. */
static void sweep_config_load(const char *text, const char *refusal)
{
    crmm_config *cfg = NULL;
    crmm_status first = crmm_config_load_string(text, "oom.ini", &cfg); /* plugins loaded */
    if (first == CRMM_OK)
        crmm_config_free(cfg);
    ck_assert_int_eq(first, refusal ? CRMM_ERROR_CONFIG : CRMM_OK);
    malloc_fail_arm(0);
    if (crmm_config_load_string(text, "oom.ini", &cfg) == CRMM_OK)
        crmm_config_free(cfg);
    int64_t left = malloc_fail_live();
    uint64_t count = malloc_fail_disarm();
    ck_assert_uint_gt(count, 10);
    ck_assert_int_eq(left, 0);
    crmm_test_log_capture_begin();
    for (uint64_t k = 1; k <= count; k++) {
        malloc_fail_arm(k);
        crmm_status st = crmm_config_load_string(text, "oom.ini", &cfg);
        if (st == CRMM_OK)
            crmm_config_free(cfg);
        left = malloc_fail_live();
        malloc_fail_disarm();
        const char *msg = crmm_last_error();
        ck_assert_msg(!(refusal && st == CRMM_OK), "malloc %llu of %llu failing: a bad config loaded as good",
                      (unsigned long long)k, (unsigned long long)count);
        ck_assert_msg(st == CRMM_OK || strstr(msg, "out of memory") || (refusal && strstr(msg, refusal)),
                      "malloc %llu failing: status %d, '%s'", (unsigned long long)k, (int)st, msg);
        ck_assert_msg(left == 0, "malloc %llu failing: %lld blocks not given back", (unsigned long long)k, (long long)left);
    }
    free(crmm_test_log_capture_end());
}

/* Several keys per section: a key that could not be copied is never compared with the next. */
CRMM_TEST_IN("malloc_failure", every_failing_malloc_in_a_config_load_is_survived)
{
    sweep_config_load("[crmm]\ndefault = s\nlog_level = warn\n"
                      "[resource.h]\nplugin = host\n"
                      "[resource.p]\nplugin = pool\nupstream = h\ninitial_size = 1MiB\nmaximum_size = 8MiB\n"
                      "release_threshold = 64KiB\nstream_reuse = sync\n"
                      "[resource.a]\nplugin = arena\nupstream = p\narena_size = 4MiB\nsuperblock_size = 1MiB\n"
                      "[resource.s]\nplugin = statistics\nupstream = a\n[device.0]\nresource = s\n",
                      NULL);
}

/* A config whose last resource breaks a rule between its parameters (checked by the plugin's
 * validate hook after everything else): memory running out on the way never makes it good. */
CRMM_TEST_IN("malloc_failure", every_failing_malloc_in_the_rule_check_fails_the_load)
{
    sweep_config_load("[resource.h]\nplugin = host\n"
                      "[resource.p]\nplugin = pool\nupstream = h\ninitial_size = 1MiB\nmaximum_size = 8MiB\n"
                      "[resource.q]\nplugin = pool\nupstream = p\ninitial_size = 2MiB\nmaximum_size = 1MiB\n",
                      "initial_size (2.0 MiB) is larger than maximum_size (1.0 MiB)");
}

/* crmm_init that fails because the config it replaces cannot be kept ("the loaded config stays")
 * leaves everything as it was: the log level too, not the new config's log_level. */
CRMM_TEST_IN("malloc_failure", a_failed_crmm_init_keeps_the_log_level)
{
    if (crmm_log_level_from_env())
        return; /* $CRMM_LOG_LEVEL wins over every config's log_level: nothing to see */
    const char *first = crmm_test_write_file("first.ini", "[crmm]\nlog_level = warn\n[resource.h]\nplugin = host\n");
    const char *second = crmm_test_write_file("second.ini", "[crmm]\nlog_level = trace\n[resource.h]\nplugin = host\n");
    ck_assert_crmm_ok(crmm_init(first));
    const crmm_config *kept = crmm_current_config();
    bool kept_refused = false;
    crmm_status st = CRMM_ERROR_OUT_OF_MEMORY;
    for (uint64_t k = 1; st != CRMM_OK && k < 100000; k++) {
        crmm_log_set_level(CRMM_LOG_WARN);
        malloc_fail_arm_from(k, 1); /* every call from the kth on: the load cannot succeed past a failure */
        st = crmm_init(second);
        malloc_fail_disarm();
        if (st != CRMM_OK && strstr(crmm_last_error(), "the loaded config stays")) {
            kept_refused = true;
            ck_assert_ptr_eq(crmm_current_config(), kept);
            ck_assert_msg(crmm_log_get_level() == CRMM_LOG_WARN, "malloc %llu failing: crmm_init failed but set the "
                          "log level to %s", (unsigned long long)k, crmm_log_level_name(crmm_log_get_level()));
        }
    }
    ck_assert_crmm_ok(st);
    ck_assert(kept_refused); /* the failure this test is about was reached */
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_TRACE);
    crmm_finalize();
}

/* Host memory that runs out inside an allocation is memory that ran out (docs/contracts.md):
 * CRMM_ERROR_OUT_OF_MEMORY from every stack, as a failure callback's retry_on=out_of_memory
 * expects, never another status. Each round fails every malloc from the Nth of one allocation
 * on, for each N it reaches, in a stack made fresh for it (so that its tables must grow). */
CRMM_TEST_IN("malloc_failure", host_memory_running_out_in_an_allocation_is_out_of_memory)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    for (size_t s = 0; s < NSTACKS; s++) {
        /* unarmed first: the plugins loaded, and the thread's TLS blocks in them made (glibc
         * aborts the process when it cannot malloc those) */
        crmm_resource *warm[CPU_STACK_LAYERS];
        crmm_resource *first = cpu_stack_build(s, host, warm);
        void *block = NULL;
        ck_assert_msg(first && crmm_resource_allocate(first, 4096, NULL, &block) == CRMM_OK, "%s: %s", cpu_stacks[s].name,
                      crmm_last_error());
        crmm_resource_deallocate(first, block, 4096, NULL);
        cpu_stack_release(warm);
        for (uint64_t k = 1;; k++) {
            crmm_resource *layers[CPU_STACK_LAYERS];
            crmm_resource *top = cpu_stack_build(s, host, layers);
            ck_assert_msg(top != NULL, "%s: %s", cpu_stacks[s].name, crmm_last_error());
            void *p = NULL;
            malloc_fail_arm_from(k, 1);
            crmm_status st = crmm_resource_allocate(top, 4096, NULL, &p);
            uint64_t calls = malloc_fail_disarm();
            char why[256];
            snprintf(why, sizeof why, "%s", crmm_last_error());
            if (st == CRMM_OK)
                crmm_resource_deallocate(top, p, 4096, NULL);
            cpu_stack_release(layers);
            ck_assert_msg(st == CRMM_OK || st == CRMM_ERROR_OUT_OF_MEMORY, "%s, mallocs failing from call %llu on: %s (%s)",
                          cpu_stacks[s].name, (unsigned long long)k, crmm_status_name(st), why);
            if (calls < k) /* no malloc failed: every one of this allocation's was reached */
                break;
        }
    }
    crmm_resource_release(host);
}

/* The replacement does fail: the Nth call returns NULL. */
CRMM_TEST_IN("malloc_failure", the_nth_malloc_fails)
{
    malloc_fail_arm(2);
    void *a = malloc(16), *b = malloc(16), *c = malloc(16);
    malloc_fail_disarm();
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(c);
    free(a);
    free(c);
}

int main(void)
{
    Suite *s = suite_create("malloc_failure");
    tcase_add_loop_test(crmm_test_tcase(s, "malloc_failure", 600), every_failing_malloc_is_survived, 0, (int)NSTACKS + 1);
    return crmm_test_run(s);
}
#else
int main(void)
{
    fprintf(stderr, "check_malloc_failure: skipped: a sanitizer build replaces malloc itself\n");
    return 77;
}
#endif
