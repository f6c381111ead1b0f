/* check_fault_injection.c — every stack that runs without a GPU (cpu_stacks.c), over the test
 * plugin `failnth` (host memory whose Nth allocation fails), with the failure at every index a
 * run reaches: each run must end in errors, not crashes, and after the stack is released every
 * block it took from failnth must be back. A first run without a failure counts the indices;
 * the total of runs is printed. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include "cpu_stacks.h"
#include "test_support.h"

#define FAILNTH_OP_CALLS 1 /* tests/plugins/failnth_plugin.c */
static const size_t sizes[] = {100, 256, 3000, 4096, 70000, 1 << 20, 5000, 200, 300000, 64};
#define ROUNDS 24

/* Build the stack over failnth(fail_at), run the allocation pattern, release everything.
 * Returns the bytes still taken from failnth afterwards (0 unless something leaked) and sets
 * *calls to failnth's allocate calls. With `leaked`, one block is deliberately not freed (to see
 * that the check notices) and handed back there, for the caller to free(). */
static uint64_t run_once(size_t s, uint64_t fail_at, void **leaked, uint64_t *calls)
{
    char params[64];
    snprintf(params, sizeof params, "fail_at=%llu", (unsigned long long)fail_at);
    crmm_resource *bottom;
    ck_assert_crmm_ok(crmm_resource_create("failnth", params, NULL, &bottom));
    crmm_resource *layers[CPU_STACK_LAYERS];
    crmm_resource *top = cpu_stack_build(s, bottom, layers);
    bool built = top != NULL; /* creation may fail at this index: an error, nothing else */
    if (built) {
        void *p[2 * ROUNDS] = {0};
        size_t n[2 * ROUNDS] = {0};
        for (int i = 0; i < ROUNDS; i++) {
            n[i] = sizes[i % (sizeof sizes / sizeof sizes[0])];
            if (crmm_resource_allocate(top, n[i], NULL, &p[i]) != CRMM_OK)
                p[i] = NULL;
        }
        for (int i = 0; i < ROUNDS; i += 2)
            if (p[i]) {
                ck_assert_crmm_ok(crmm_resource_deallocate(top, p[i], n[i], NULL));
                p[i] = NULL;
            }
        for (int i = ROUNDS; i < 2 * ROUNDS; i++) {
            n[i] = sizes[(i * 7) % (sizeof sizes / sizeof sizes[0])];
            if (crmm_resource_allocate(top, n[i], NULL, &p[i]) != CRMM_OK)
                p[i] = NULL;
        }
        for (int i = 0; i < 2 * ROUNDS; i++)
            if (p[i]) {
                if (leaked && !*leaked) {
                    *leaked = p[i];
                    continue;
                }
                ck_assert_crmm_ok(crmm_resource_deallocate(top, p[i], n[i], NULL));
            }
        crmm_status st = crmm_resource_trim(top);
        ck_assert(st == CRMM_OK || st == CRMM_ERROR_UNSUPPORTED);
    }
    cpu_stack_release(layers);
    ck_assert_crmm_ok(crmm_resource_control(bottom, FAILNTH_OP_CALLS, calls));
    uint64_t left = crmm_test_query(bottom, CRMM_QUERY_BYTES_IN_USE);
    crmm_resource_release(bottom);
    return left;
}

START_TEST(every_failing_index_is_survived) /* one run per stack: registered in main */
{
    uint64_t calls = 0;
    ck_assert_uint_eq(run_once((size_t)_i, 0, NULL, &calls), 0);
    ck_assert_uint_gt(calls, 0);
    uint64_t runs = 1;
    for (uint64_t k = 1; k <= calls; k++, runs++) {
        uint64_t c;
        uint64_t left = run_once((size_t)_i, k, NULL, &c);
        ck_assert_msg(left == 0, "stack %s, allocation %llu failing: %llu bytes not given back", cpu_stacks[_i].name,
                      (unsigned long long)k, (unsigned long long)left);
    }
    fprintf(stderr, "fault injection: %s: %llu upstream allocations, %llu runs\n", cpu_stacks[_i].name,
            (unsigned long long)calls, (unsigned long long)runs);
}

/* The check itself can fail: a block not freed through a pass-through stack is seen. */
CRMM_TEST_IN("fault_injection", a_leak_is_seen)
{
    uint64_t calls;
    size_t statistics = 6;
    ck_assert_str_eq(cpu_stacks[statistics].name, "statistics");
    crmm_test_log_capture_begin(); /* the leak report at destroy */
    void *leaked = NULL;
    uint64_t left = run_once(statistics, 0, &leaked, &calls);
    free(crmm_test_log_capture_end());
    ck_assert_uint_gt(left, 0);
    free(leaked); /* failnth's block, from aligned_alloc: the leak checker need not see it too */
}

int main(void)
{
    Suite *s = suite_create("fault_injection");
    tcase_add_loop_test(crmm_test_tcase(s, "fault_injection", 600), every_failing_index_is_survived, 0, (int)cpu_stack_count);
    return crmm_test_run(s);
}
