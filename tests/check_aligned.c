/* check_aligned.c — the aligned adaptor over host memory: conformance, large blocks aligned to
 * 4 KiB, 64 KiB and 1 MiB (the whole block writable: ASan checks it lies inside the upstream
 * block), the exact upstream size (align_up(n) + alignment - 256, as RMM), small requests
 * passing through untouched, the original pointer freed upstream, and bad alignments. */
#include "build_config.h"
#include "blocks_test.h"
#include "conformance.h"
#include "over_host.h"
#include <crmm/callback.h>

static const crmm_test_chain chains[] = {
    {"aligned_4k_over_host", "[resource.h]\nplugin = host\n[resource.a]\nplugin = aligned\nupstream = h\nalignment = 4KiB\n", "a", 0, 0},
    {"aligned_1m_threshold_over_host",
     "[resource.h]\nplugin = host\n[resource.a]\nplugin = aligned\nupstream = h\nalignment = 1MiB\nalignment_threshold = 64KiB\n",
     "a", 0, 0},
};

static uint64_t in_use(crmm_resource *r) { return crmm_test_query(r, CRMM_QUERY_BYTES_IN_USE); }

/* The running test's host upstream and aligned adaptor over it (make); released by release_both,
 * or by the fixture. */
static crmm_resource *h, *mr;

static void make(const char *params) { over_host_make("aligned", params, &h, &mr); }

static void release_both(void) { over_host_release(&h, &mr); }

static size_t align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

static const size_t alignments[] = {4096, 65536, 1 << 20};

CRMM_LOOP_TEST_IN("aligned", large_blocks_are_aligned, 3)
{
    static const size_t sizes[] = {1, 256, 1000, 4096, 65536, 100000, 3 << 20};
    size_t a = alignments[_i];
    char params[64];
    snprintf(params, sizeof params, "alignment=%zu", a);
    make(params);
    void *p[7];
    uint64_t expected = 0;
    for (size_t k = 0; k < 7; k++) {
        ck_assert_crmm_ok(crmm_resource_allocate(mr, sizes[k], NULL, &p[k]));
        ck_assert_msg((uintptr_t)p[k] % a == 0, "alignment %zu, %zu bytes: %p", a, sizes[k], p[k]);
        memset(p[k], (int)k, sizes[k]);
        expected += align_up(sizes[k], a) + a - 256;
        ck_assert_uint_eq(in_use(h), expected);
    }
    ck_assert_uint_eq(in_use(mr), 1 + 256 + 1000 + 4096 + 65536 + 100000 + (3 << 20)); /* as requested */
    for (size_t k = 0; k < 7; k++)
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[k], sizes[k], NULL));
    ck_assert_uint_eq(in_use(h), 0);
}

CRMM_TEST_IN("aligned", below_threshold_passes_through)
{
    make("alignment=4KiB alignment_threshold=64KiB");
    void *p, *q, *r;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 3, NULL, &p));
    ck_assert_uint_eq(in_use(h), 3); /* the upstream saw exactly the request */
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 65535, NULL, &q));
    ck_assert_uint_eq(in_use(h), 3 + 65535);
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 65536, NULL, &r)); /* the threshold itself is aligned */
    ck_assert_uint_eq(in_use(h), 3 + 65535 + 65536 + 4096 - 256);
    ck_assert_uint_eq((uintptr_t)r % 4096, 0);
    memset(r, 1, 65536);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, q, 65535, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, r, 65536, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 3, NULL));
    ck_assert_uint_eq(in_use(h), 0);
}

/* The default alignment, and alignments below 256 (which become 256, what upstream gives anyway):
 * a request passes through to upstream as it is. */
static const struct { const char *params; size_t bytes; } pass_through[] = {
    {"", 5}, {"alignment=32", 100000}, {"alignment=64", 100000}, {"alignment=128", 100000}, {"alignment=1", 100000},
};

CRMM_LOOP_TEST_IN("aligned", alignments_up_to_256_pass_through, (int)(sizeof pass_through / sizeof pass_through[0]))
{
    size_t n = pass_through[_i].bytes;
    make(pass_through[_i].params);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, n, NULL, &p));
    ck_assert_uint_eq((uintptr_t)p % 256, 0);
    ck_assert_uint_eq(in_use(h), n);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, n, NULL));
}

static const char *const bad_alignments[] = {"alignment=0", "alignment=3", "alignment=255", "alignment=768",
                                             "alignment=3KiB", "alignment=big", "alignment_threshold=-5",
                                             "alignment=2TiB"}; /* no allocation could be served */

CRMM_LOOP_TEST_IN("aligned", bad_alignment_is_refused, (int)(sizeof bad_alignments / sizeof bad_alignments[0]))
{
    const char *bad = bad_alignments[_i];
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, &h));
    crmm_clear_error();
    crmm_status st = crmm_resource_create("aligned", bad, h, &mr);
    ck_assert_msg(st == CRMM_ERROR_CONFIG, "'%s' gave %s: %s", bad, crmm_status_name(st), crmm_last_error());
    ck_assert_msg(strstr(crmm_last_error(), "alignment") != NULL, "'%s': %s", bad, crmm_last_error());
    ck_assert_ptr_null(mr);
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
}

/* An upstream that takes no size and whose blocks never start on 64 KiB (256 bytes past it),
 * and frees what it was given as its own block: an interior pointer would free memory it never
 * handed out. */
static void *off_alloc(size_t bytes, crmm_cuda_stream_t stream, void *arg)
{
    (void)stream, (void)arg;
    char *base = aligned_alloc(65536, ((bytes + 256 + 65535) / 65536) * 65536);
    return base ? base + 256 : NULL;
}

static void off_free(void *ptr, size_t bytes, crmm_cuda_stream_t stream, void *arg)
{
    (void)bytes, (void)stream;
    ck_assert_msg(((uintptr_t)ptr & 65535) == 256, "upstream got %p, not one of its blocks", ptr);
    ++*(int *)arg;
    free((char *)ptr - 256);
}

/* A block moved to its alignment, freed with a size below the threshold, is refused by the
 * adaptor itself: the upstream never sees the aligned (interior) pointer, and the block stays
 * live, freed later with its own size. */
CRMM_TEST_IN("aligned", a_moved_block_freed_with_a_size_below_the_threshold_is_refused)
{
    int frees = 0;
    crmm_resource *up = NULL, *a = NULL;
    ck_assert_crmm_ok(crmm_callback_resource_create_with(off_alloc, off_free, NULL, &frees, "host_accessible=true", &up));
    ck_assert_crmm_ok(crmm_resource_create("aligned", "alignment=64KiB alignment_threshold=8KiB", up, &a));
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(a, 10000, NULL, &p));
    ck_assert_uint_eq((uintptr_t)p % 65536, 0); /* moved: 65280 bytes past the upstream's pointer */
    ck_assert_crmm(crmm_resource_deallocate(a, p, 100, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "it was allocated with at least 8192 (aligned)") != NULL, "%s",
                  crmm_last_error());
    ck_assert_int_eq(frees, 0);
    ck_assert_crmm_ok(crmm_resource_deallocate(a, p, 10000, NULL));
    ck_assert_int_eq(frees, 1);
    crmm_test_release(a, up);
}

CRMM_TEST_IN("aligned", original_pointer_goes_back_upstream)
{
    /* Many live blocks with a large alignment: most upstream pointers move, the map grows and
     * shrinks, and every free must give upstream its own pointer (ASan's free checks it). */
    make("alignment=64KiB");
    enum { N = 1000 };
    static struct { void *p; size_t n; } b[N];
    for (int k = 0; k < N; k++) {
        b[k].n = 300 + (size_t)k * 7;
        ck_assert_crmm_ok(crmm_resource_allocate(mr, b[k].n, NULL, &b[k].p));
        ck_assert_uint_eq((uintptr_t)b[k].p % 65536, 0);
    }
    uint64_t seed = 99;
    for (int k = N - 1; k > 0; k--) { /* free in a shuffled order */
        int j = (int)(crmm_test_rand(&seed) % (uint64_t)(k + 1));
        void *tp = b[k].p;
        size_t tn = b[k].n;
        b[k].p = b[j].p, b[k].n = b[j].n;
        b[j].p = tp, b[j].n = tn;
    }
    for (int k = 0; k < N; k++)
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, b[k].p, b[k].n, NULL));
    ck_assert_uint_eq(in_use(h), 0);
    ck_assert_uint_eq(in_use(mr), 0);
}

CRMM_TEST_IN("aligned", sizes_that_overflow_when_aligned)
{
    make("alignment=1MiB");
    void *p = (void *)0x1;
    crmm_clear_error();
    ck_assert_crmm(crmm_resource_allocate(mr, SIZE_MAX - 100, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(crmm_last_error(), "overflows"), "message: %s", crmm_last_error());
    ck_assert_crmm(crmm_resource_deallocate(mr, (void *)0x100000, SIZE_MAX, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(in_use(mr), 0); /* the refused free changed nothing */
    ck_assert_uint_eq(in_use(h), 0);
}

typedef struct churn_arg { crmm_resource *mr; int seed; int failures; } churn_arg;

static void *churn(void *arg)
{
    churn_arg *c = arg;
    void *p[32];
    for (int round = 0; round < 200; round++) {
        for (int k = 0; k < 32; k++)
            if (crmm_resource_allocate(c->mr, 5000 + (size_t)(k * 97 + c->seed), NULL, &p[k]) != CRMM_OK ||
                (uintptr_t)p[k] % 4096 != 0)
                c->failures++;
        for (int k = 31; k >= 0; k--)
            if (crmm_resource_deallocate(c->mr, p[k], 5000 + (size_t)(k * 97 + c->seed), NULL) != CRMM_OK)
                c->failures++;
    }
    return NULL;
}

CRMM_TEST_IN("aligned", threads_share_the_pointer_map)
{
    make("alignment=4KiB");
    pthread_t t[4];
    churn_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (churn_arg){mr, i, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(a[i].failures, 0);
    }
    ck_assert_uint_eq(in_use(h), 0);
}

int main(void)
{
    Suite *s = suite_create("aligned");
    crmm_conformance_add(s, chains, (int)(sizeof chains / sizeof chains[0]));
    TCase *tc = crmm_test_tcase(s, "aligned", 0);
    tcase_add_checked_fixture(tc, NULL, release_both);
    return crmm_test_run(s);
}
