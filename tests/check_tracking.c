/* check_tracking.c — the `tracking` plugin over host memory: RMM's tracking tests (empty, all
 * freed, left with and without stacks, stacked adaptors), the report and the callback, bad
 * frees (wrong size, unknown pointer) refused and never passed upstream, the leak report at
 * destroy (read back from the crmm log), threads, and the conformance suite. */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "conformance.h"
#include "probe_resource.h"
#include "test_support.h"

#define TEN_MIB ((size_t)10 << 20)

static uint64_t count_of(crmm_resource *mr)
{
    uint64_t n = 12345;
    ck_assert_crmm_ok(crmm_tracking_count(mr, &n));
    return n;
}

static uint64_t bytes_of(crmm_resource *mr)
{
    uint64_t n = 12345;
    ck_assert_crmm_ok(crmm_tracking_bytes(mr, &n));
    return n;
}

CRMM_TEST_IN("tracking", empty)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *mr = crmm_test_create("tracking", NULL, host);
    ck_assert_uint_eq(count_of(mr), 0);
    ck_assert_uint_eq(bytes_of(mr), 0);
    crmm_test_release(mr, host);
}

CRMM_TEST_IN("tracking", all_freed)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *mr = crmm_test_create("tracking", NULL, host);
    void *p[10];
    for (int i = 0; i < 10; i++)
        p[i] = crmm_test_allocate(mr, TEN_MIB);
    ck_assert_uint_eq(count_of(mr), 10);
    ck_assert_uint_eq(bytes_of(mr), 10 * TEN_MIB);
    for (int i = 0; i < 10; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], TEN_MIB, NULL));
    ck_assert_uint_eq(count_of(mr), 0);
    ck_assert_uint_eq(bytes_of(mr), 0);
    crmm_test_release(mr, host);
}

typedef struct seen {
    int n;
    int with_stack;
    uint64_t last_serial;
    int in_order;
    void *ptrs[16];
    size_t bytes[16];
    int stop_after;
} seen;

static int visit(const crmm_tracking_allocation *a, void *arg)
{
    seen *s = arg;
    if (s->n < 16) {
        s->ptrs[s->n] = a->ptr;
        s->bytes[s->n] = a->bytes;
    }
    s->n++;
    if (a->stack && a->stack_depth > 0)
        s->with_stack++;
    if (a->serial <= s->last_serial)
        s->in_order = 0;
    s->last_serial = a->serial;
    return s->stop_after && s->n >= s->stop_after;
}

static void left_over(int capture)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    crmm_resource *mr = crmm_test_create("tracking", capture ? "capture_stacks=true" : NULL, host);
    void *p[10];
    for (int i = 0; i < 10; i++)
        p[i] = crmm_test_allocate(mr, TEN_MIB + (size_t)i);
    for (int i = 0; i < 10; i += 2)
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], TEN_MIB + (size_t)i, NULL));
    ck_assert_uint_eq(count_of(mr), 5);
    ck_assert_uint_eq(bytes_of(mr), 5 * TEN_MIB + 1 + 3 + 5 + 7 + 9);
    seen s = {.in_order = 1};
    ck_assert_crmm_ok(crmm_tracking_foreach(mr, visit, &s));
    ck_assert_int_eq(s.n, 5);
    ck_assert_int_eq(s.in_order, 1); /* oldest first */
    for (int k = 0; k < 5; k++) {
        ck_assert_ptr_eq(s.ptrs[k], p[2 * k + 1]);
        ck_assert_uint_eq(s.bytes[k], TEN_MIB + (size_t)(2 * k + 1));
    }
    ck_assert_int_eq(s.with_stack, capture ? 5 : 0);
    char *text = NULL;
    ck_assert_crmm_ok(crmm_tracking_outstanding(mr, &text));
    ck_assert_msg(strstr(text, "Outstanding allocations: 5") != NULL, "report: %s", text);
    for (int i = 1; i < 10; i += 2) {
        char line[64];
        snprintf(line, sizeof line, "  %p: %zu bytes\n", p[i], TEN_MIB + (size_t)i);
        ck_assert_msg(strstr(text, line) != NULL, "report lacks '%s': %s", line, text);
    }
    ck_assert_int_eq(strstr(text, "    #0 ") != NULL, capture);
    free(text);
    for (int i = 1; i < 10; i += 2)
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], TEN_MIB + (size_t)i, NULL));
    crmm_test_release(mr, host);
}

START_TEST(allocations_left_with_stacks) { left_over(1); }

START_TEST(allocations_left_without_stacks) { left_over(0); }

CRMM_TEST_IN("tracking", foreach_stops_when_asked)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *mr = crmm_test_create("tracking", NULL, host);
    void *p[6];
    for (int i = 0; i < 6; i++)
        p[i] = crmm_test_allocate(mr, 512);
    seen s = {.in_order = 1, .stop_after = 2};
    ck_assert_crmm_ok(crmm_tracking_foreach(mr, visit, &s));
    ck_assert_int_eq(s.n, 2);
    ck_assert_crmm(crmm_tracking_foreach(mr, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < 6; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], 512, NULL));
    crmm_test_release(mr, host);
}

CRMM_TEST_IN("tracking", stacked_trackers)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *outer = crmm_test_create("tracking", "capture_stacks=1", host);
    crmm_resource *inner = crmm_test_create("tracking", NULL, outer);
    void *p[15];
    for (int i = 0; i < 10; i++)
        p[i] = crmm_test_allocate(outer, TEN_MIB);
    for (int i = 10; i < 15; i++)
        p[i] = crmm_test_allocate(inner, TEN_MIB);
    ck_assert_uint_eq(count_of(outer), 15);
    ck_assert_uint_eq(count_of(inner), 5); /* the API finds the first tracking layer */
    ck_assert_uint_eq(bytes_of(outer), 15 * TEN_MIB);
    ck_assert_uint_eq(bytes_of(inner), 5 * TEN_MIB);
    /* the inner one refuses what it did not hand out (RMM would pass it on) */
    ck_assert_crmm(crmm_resource_deallocate(inner, p[0], TEN_MIB, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(count_of(outer), 15);
    for (int i = 0; i < 10; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(outer, p[i], TEN_MIB, NULL));
    for (int i = 10; i < 15; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(inner, p[i], TEN_MIB, NULL));
    ck_assert_uint_eq(count_of(outer), 0);
    ck_assert_uint_eq(count_of(inner), 0);
    crmm_test_release(inner, outer, host);
}

CRMM_TEST_IN("tracking", wrong_size_free_is_refused)
{
    crmm_test_log_capture_begin();
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *stats = crmm_test_create("statistics", NULL, host);
    crmm_resource *mr = crmm_test_create("tracking", NULL, stats);
    void *p = crmm_test_allocate(mr, TEN_MIB);
    ck_assert_crmm(crmm_resource_deallocate(mr, p, TEN_MIB / 2, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "5242880") && strstr(crmm_last_error(), "10485760"), "message: %s",
                  crmm_last_error());
    ck_assert_uint_eq(count_of(mr), 1); /* still outstanding */
    crmm_alloc_counters c;
    ck_assert_crmm_ok(crmm_statistics_get(stats, &c));
    ck_assert_int_eq(c.count, 1); /* the upstream never saw the bad free */
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, TEN_MIB, NULL));
    ck_assert_uint_eq(count_of(mr), 0);
    char *text = crmm_test_log_capture_end();
    ck_assert_msg(strstr(text, "[error]") && strstr(text, "allocated with 10485760 bytes"), "log: %s", text);
    free(text);
    crmm_test_release(mr, stats, host);
}

CRMM_TEST_IN("tracking", unknown_pointer_is_refused)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *mr = crmm_test_create("tracking", NULL, host);
    char on_stack[512];
    /* host would free() it and crash: returning an error proves it did not go upstream */
    ck_assert_crmm(crmm_resource_deallocate(mr, on_stack, sizeof on_stack, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "did not allocate"));
    void *p = crmm_test_allocate(mr, 100);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 100, NULL));
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 100, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* double free */
    ck_assert_uint_eq(count_of(mr), 0);
    crmm_test_release(mr, host);
}

/* A free the upstream refuses leaves the block live: tracking keeps its record (its size and
 * place in the list and the report) and its counts, and the free the upstream takes later works. */
CRMM_TEST_IN("tracking", refused_upstream_free_keeps_the_record)
{
    probe_resource *probe = probe_resource_new(NULL, CRMM_RESOURCE_HOST_ACCESSIBLE, -1);
    crmm_resource *mr = crmm_test_create("tracking", NULL, &probe->base);
    void *p = crmm_test_allocate(mr, 1000), *q = crmm_test_allocate(mr, 2000);
    probe->refuses_frees = 1;
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 1000, NULL), CRMM_ERROR_CUDA);
    ck_assert_int_eq(probe->live, 2);
    ck_assert_uint_eq(count_of(mr), 2);
    ck_assert_uint_eq(bytes_of(mr), 3000);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 2);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_BYTES_IN_USE), 3000);
    seen s = {.in_order = 1};
    ck_assert_crmm_ok(crmm_tracking_foreach(mr, visit, &s));
    ck_assert_int_eq(s.n, 2);
    ck_assert_int_eq(s.in_order, 1);
    ck_assert_ptr_eq(s.ptrs[0], p); /* still the oldest */
    ck_assert_uint_eq(s.bytes[0], 1000);
    char *text = NULL, line[64];
    ck_assert_crmm_ok(crmm_tracking_outstanding(mr, &text));
    snprintf(line, sizeof line, "  %p: 1000 bytes\n", p);
    ck_assert_msg(strstr(text, "Outstanding allocations: 2") && strstr(text, line), "report: %s", text);
    free(text);
    /* the block is still tracking's to free, with its size checked as before */
    ck_assert_crmm(crmm_resource_deallocate(mr, p, 999, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    probe->refuses_frees = 0;
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, q, 2000, NULL));
    ck_assert_int_eq(probe->live, 0);
    ck_assert_uint_eq(count_of(mr), 0);
    ck_assert_uint_eq(bytes_of(mr), 0);
    crmm_test_release(mr, &probe->base);
}

CRMM_TEST_IN("tracking", leaks_are_reported_at_destroy)
{
    crmm_test_log_capture_begin();
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *mr = crmm_test_create("tracking", "capture_stacks=true", host);
    snprintf(mr->name, sizeof mr->name, "leaky");
    void *a = crmm_test_allocate(mr, 1000), *b = crmm_test_allocate(mr, 2000), *c = crmm_test_allocate(mr, 3000);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, b, 2000, NULL));
    crmm_resource_release(mr); /* a and c leak */
    char *text = crmm_test_log_capture_end();
    ck_assert_msg(strstr(text, "[warn]") && strstr(text, "'leaky' destroyed with 2 live allocations"), "log: %s", text);
    char line[96];
    snprintf(line, sizeof line, "%p: 1000 bytes", a);
    ck_assert_msg(strstr(text, line) != NULL, "log lacks '%s': %s", line, text);
    snprintf(line, sizeof line, "%p: 3000 bytes", c);
    ck_assert_msg(strstr(text, line) != NULL, "log lacks '%s': %s", line, text);
    snprintf(line, sizeof line, "%p:", b);
    ck_assert_msg(strstr(text, line) == NULL, "freed %p reported: %s", b, text);
    ck_assert_msg(strstr(text, "#0 ") != NULL, "no stack in: %s", text);
    free(text);
    /* the memory itself is still the host's: give it back */
    ck_assert_crmm_ok(crmm_resource_deallocate(host, a, 1000, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(host, c, 3000, NULL));
    crmm_resource_release(host);
}

CRMM_TEST_IN("tracking", log_outstanding_writes_the_report)
{
    crmm_test_log_capture_begin();
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_DEBUG));
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *mr = crmm_test_create("tracking", NULL, host);
    void *p = crmm_test_allocate(mr, 4096);
    ck_assert_crmm_ok(crmm_tracking_log_outstanding(mr, CRMM_LOG_DEBUG));
    char *text = crmm_test_log_capture_end();
    char line[64];
    snprintf(line, sizeof line, "%p: 4096 bytes", p);
    ck_assert_msg(strstr(text, "[debug]") && strstr(text, "Outstanding allocations: 1") && strstr(text, line),
                  "log: %s", text);
    free(text);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4096, NULL));
    crmm_test_release(mr, host);
}

CRMM_TEST_IN("tracking", api_rejects_bad_arguments)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    uint64_t n;
    ck_assert_crmm(crmm_tracking_count(host, &n), CRMM_ERROR_UNSUPPORTED);
    ck_assert_crmm(crmm_tracking_count(NULL, &n), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_resource *mr = crmm_test_create("tracking", NULL, host);
    ck_assert_crmm(crmm_tracking_count(mr, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_control(mr, CRMM_TRACKING_OP_STRING, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_resource *bad = NULL;
    ck_assert_crmm(crmm_resource_create("tracking", "capture_stacks=maybe", host, &bad), CRMM_ERROR_CONFIG);
    crmm_test_release(mr, host);
}

static void *churn(void *arg)
{
    crmm_resource *mr = arg;
    void *p[32] = {0};
    uint64_t x = (uint64_t)(uintptr_t)&p | 1;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int k = (int)(x % 32);
        size_t n = 64 + k; /* the slot fixes the size */
        if (p[k]) {
            if (crmm_resource_deallocate(mr, p[k], n, NULL) != CRMM_OK)
                return (void *)1;
            p[k] = NULL;
        } else if (crmm_resource_allocate(mr, n, NULL, &p[k]) != CRMM_OK) {
            return (void *)1;
        }
    }
    for (int k = 0; k < 32; k++)
        if (p[k] && crmm_resource_deallocate(mr, p[k], 64 + (size_t)k, NULL) != CRMM_OK)
            return (void *)1;
    return NULL;
}

CRMM_TEST_IN("tracking", threads_with_address_reuse)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *mr = crmm_test_create("tracking", NULL, host);
    pthread_t t[4];
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(pthread_create(&t[k], NULL, churn, mr), 0);
    for (int k = 0; k < 4; k++) {
        void *ret;
        ck_assert_int_eq(pthread_join(t[k], &ret), 0);
        ck_assert_ptr_null(ret); /* no free was refused: the table never lost or doubled a record */
    }
    ck_assert_uint_eq(count_of(mr), 0);
    ck_assert_uint_eq(bytes_of(mr), 0);
    crmm_test_release(mr, host);
}

CRMM_TEST_IN("tracking", many_records_grow_and_shrink_the_table)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *mr = crmm_test_create("tracking", NULL, host);
    enum { N = 20000 };
    void **p = malloc(N * sizeof *p);
    for (int i = 0; i < N; i++)
        p[i] = crmm_test_allocate(mr, 16);
    ck_assert_uint_eq(count_of(mr), N);
    for (int i = 0; i < N; i += 3) /* holes all over the probe runs */
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], 16, NULL));
    for (int i = 0; i < N; i++)
        if (i % 3)
            ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], 16, NULL));
    ck_assert_uint_eq(count_of(mr), 0);
    free(p);
    crmm_test_release(mr, host);
}

static const crmm_test_chain chains[] = {
    {"tracking_over_host", "[resource.h]\nplugin = host\n[resource.t]\nplugin = tracking\nupstream = h\n", "t", 0, 0},
};

int main(void)
{
    Suite *s = suite_create("tracking");
    TCase *tc = crmm_test_tcase(s, "tracking", 0);
    tcase_add_test(tc, allocations_left_with_stacks);
    tcase_add_test(tc, allocations_left_without_stacks);
    crmm_conformance_add(s, chains, 1);
    return crmm_test_run(s);
}
