/* check_pool_expandable.c — the expandable pool (expandable = true) on the CPU, against the
 * scripted CUDA driver of fake_vmm.h, which backs "device memory" with host pages (a block the
 * pool hands out over a page it did not map crashes the test when written) and counts every
 * call, so the tests state exactly what the pool maps, when it synchronizes and gives memory
 * back, and that it never holds more than it must. */
#include "config.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/pool.h>
#include "fakes/fake_vmm.h"
#include "test_support.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE (64 * KiB)          /* the scripted device's allocation granularity */
#define DEVICE_MEMORY (64 * MiB) /* what cudaMemGetInfo says the device has */

/* A pool with expandable=true and `params` over the scripted driver. */
static crmm_resource *expandable_pool(const char *params)
{
    crmm_resource *p = NULL;
    ck_assert_crmm_ok(fake_vmm_expandable_pool(params, &p));
    return p;
}

/* ---- helpers -------------------------------------------------------------------------------- */

static uint64_t q(crmm_resource *mr, crmm_query what) { return crmm_test_query(mr, what); }

static cudaStream_t stream_n(int n) { return (cudaStream_t)(uintptr_t)(0x1000 + 0x100 * n); }

/* Allocate n bytes on stream s and write all of them (a page the pool did not map would crash). */
static unsigned char *alloc_on(crmm_resource *p, size_t n, cudaStream_t s)
{
    void *x = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(p, n, (crmm_cuda_stream_t)s, &x));
    ck_assert_ptr_nonnull(x);
    memset(x, 0xA5, n);
    return x;
}

static unsigned char *alloc(crmm_resource *p, size_t n) { return alloc_on(p, n, NULL); }

static void free_on(crmm_resource *p, void *x, size_t n, cudaStream_t s)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(p, x, n, (crmm_cuda_stream_t)s));
}

static void dealloc(crmm_resource *p, void *x, size_t n) { free_on(p, x, n, NULL); }

/* The pool's books agree with the driver: what it reserves is what is mapped, and nothing more
 * physical memory is held than mapped (spare pages were released). */
static void books_agree(crmm_resource *p)
{
    size_t mapped = fake_vmm_mapped_bytes();
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), mapped);
    ck_assert_uint_eq(fake_vmm.physical, mapped);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), mapped / PAGE);
}

static void setup(void) { fake_vmm_reset(PAGE, DEVICE_MEMORY); }

/* ---- tests ---------------------------------------------------------------------------------- */

START_TEST(it_maps_what_it_needs_and_never_asks_the_upstream)
{
    crmm_resource *p = expandable_pool("");
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0); /* starts empty */
    ck_assert_int_eq(fake_vmm.reserves, 1);
    unsigned char *a = alloc(p, 100 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 2 * PAGE);
    unsigned char *b = alloc(p, 1 * MiB); /* 28 KiB are left in a's second page: 16 new pages */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 2 * PAGE + 16 * PAGE);
    ck_assert_ptr_eq(b, a + 100 * KiB); /* right above a: one range, no chunk boundary */
    books_agree(p);
    ck_assert_int_eq(fake_vmm.upstream_calls, 0);
    ck_assert_int_eq(fake_vmm.set_access, 2); /* one per growth, over the whole run */
    dealloc(p, a, 100 * KiB);
    dealloc(p, b, 1 * MiB);
    crmm_resource_release(p);
}
END_TEST

START_TEST(free_blocks_merge_across_growth_steps)
{
    crmm_resource *p = expandable_pool("");
    unsigned char *a = alloc(p, PAGE), *b = alloc(p, PAGE), *c = alloc(p, PAGE);
    ck_assert_int_eq(fake_vmm.maps, 3); /* three growth steps */
    dealloc(p, a, PAGE);
    dealloc(p, b, PAGE);
    dealloc(p, c, PAGE);
    unsigned char *d = alloc(p, 3 * PAGE); /* fits in what the three steps mapped */
    ck_assert_ptr_eq(d, a);
    ck_assert_int_eq(fake_vmm.maps, 3);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 3 * PAGE);
    dealloc(p, d, 3 * PAGE);
    crmm_resource_release(p);
}
END_TEST

/* A free with another size than the one asked for is refused: nothing is unmapped or merged,
 * the block stays live, and its right free works. */
START_TEST(a_wrong_size_is_refused)
{
    crmm_resource *p = expandable_pool("");
    unsigned char *a = alloc(p, 100 * KiB);
    ck_assert_crmm(crmm_resource_deallocate(p, a, 2 * PAGE, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "it is a block of") != NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_resource_deallocate(p, a, 100 * KiB - 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 100 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_ALLOCATIONS), 1);
    memset(a, 0x5A, 100 * KiB); /* still mapped */
    dealloc(p, a, 100 * KiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    books_agree(p);
    crmm_resource_release(p);
}
END_TEST

START_TEST(growth_joins_the_free_block_below)
{
    crmm_resource *p = expandable_pool("");
    unsigned char *a = alloc(p, PAGE / 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), PAGE);
    unsigned char *b = alloc(p, PAGE); /* half a page is free above a: one more page is enough */
    ck_assert_ptr_eq(b, a + PAGE / 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 2 * PAGE);
    dealloc(p, a, PAGE / 2);
    dealloc(p, b, PAGE);
    crmm_resource_release(p);
}
END_TEST

START_TEST(growth_maps_freed_pages_again_instead_of_new_memory)
{
    crmm_resource *p = expandable_pool("");
    unsigned char *x = alloc(p, 3 * PAGE), *y = alloc(p, PAGE);
    dealloc(p, x, 3 * PAGE); /* three free pages below y: too small for what comes next */
    fake_vmm.device_syncs = 0;
    unsigned char *z = alloc(p, 4 * PAGE);
    /* x's pages were unmapped (after one device synchronization) and mapped again above y */
    ck_assert_int_eq(fake_vmm.device_syncs, 1);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 5 * PAGE);
    ck_assert_uint_eq(fake_vmm.physical_peak, 5 * PAGE); /* never more than live */
    ck_assert_int_eq(fake_vmm.creates, 5);                /* 4 + 1: the freed pages were reused */
    ck_assert_int_eq(fake_vmm.releases, 0);
    books_agree(p);
    dealloc(p, y, PAGE);
    dealloc(p, z, 4 * PAGE);
    crmm_resource_release(p);
}
END_TEST

START_TEST(growth_below_the_high_water_mark_does_not_wait)
{
    crmm_resource *p = expandable_pool("");
    unsigned char *a = alloc(p, 2 * PAGE), *b = alloc(p, 2 * PAGE); /* the mark: 4 pages */
    dealloc(p, a, 2 * PAGE);
    dealloc(p, b, 2 * PAGE);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    unsigned char *c = alloc(p, PAGE), *d = alloc(p, PAGE);
    dealloc(p, c, PAGE); /* one free page, too small for e */
    fake_vmm.device_syncs = 0;
    unsigned char *e = alloc(p, 2 * PAGE);
    /* 2 + 2 pages stay within the 4 the pool held before: it maps without waiting for the device */
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * PAGE);
    ck_assert_ptr_eq(e, d + PAGE);
    books_agree(p);
    dealloc(p, d, PAGE);
    dealloc(p, e, 2 * PAGE);
    crmm_resource_release(p);
}
END_TEST

START_TEST(growth_past_the_mark_moves_only_the_pages_it_needs)
{
    crmm_resource *p = expandable_pool("");
    unsigned char *a = alloc(p, 3 * PAGE), *b = alloc(p, PAGE), *c = alloc(p, 2 * PAGE); /* mark: 6 */
    ck_assert_ptr_eq(c, a + 4 * PAGE);
    dealloc(p, a, 3 * PAGE);
    dealloc(p, c, 2 * PAGE);
    fake_vmm.device_syncs = 0;
    unsigned char *z = alloc(p, 4 * PAGE);
    /* z joins c's two free pages at the top with two more; those two are a's top pages, moved
     * after one synchronization: the pool holds no more than its mark and no new memory */
    ck_assert_int_eq(fake_vmm.device_syncs, 1);
    ck_assert_ptr_eq(z, c);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 6 * PAGE);
    ck_assert_uint_eq(fake_vmm.physical_peak, 6 * PAGE);
    ck_assert_int_eq(fake_vmm.creates, 6);
    books_agree(p);
    unsigned char *w = alloc(p, PAGE); /* a's bottom page stayed mapped and free */
    ck_assert_ptr_eq(w, a);
    ck_assert_int_eq(fake_vmm.device_syncs, 1);
    dealloc(p, w, PAGE);
    dealloc(p, b, PAGE);
    dealloc(p, z, 4 * PAGE);
    crmm_resource_release(p);
}
END_TEST

START_TEST(growth_within_the_slack_above_the_mark_does_not_wait)
{
    crmm_resource *p = expandable_pool("");
    unsigned char *a = alloc(p, 31 * PAGE), *b = alloc(p, PAGE); /* mark: 32 pages, slack: 1 page */
    dealloc(p, b, PAGE);
    fake_vmm.device_syncs = 0;
    unsigned char *z = alloc(p, 2 * PAGE); /* b's free page and one more: 33 pages, within the slack */
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_ptr_eq(z, b);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 33 * PAGE);
    books_agree(p);
    dealloc(p, a, 31 * PAGE);
    dealloc(p, z, 2 * PAGE);
    crmm_resource_release(p);
}
END_TEST

/* A sequence in the shape of BERT's training steps (bench/logs/bert_train): the model stays live
 * below; each step has A, C and B1 live, frees A, takes B2 of twice A's size while C and B1 are
 * live, then frees them all; B2 never fits where A was. */
static void replay_training(crmm_resource *p)
{
    unsigned char *model = alloc(p, 20 * PAGE);
    for (int step = 0; step < 4; step++) {
        unsigned char *a = alloc(p, 8 * PAGE), *c = alloc(p, 8 * PAGE), *b1 = alloc(p, 16 * PAGE);
        dealloc(p, a, 8 * PAGE);
        unsigned char *b2 = alloc(p, 16 * PAGE);
        dealloc(p, b1, 16 * PAGE);
        unsigned char *d = alloc(p, 8 * PAGE);
        dealloc(p, b2, 16 * PAGE);
        unsigned char *e = alloc(p, 8 * PAGE);
        dealloc(p, d, 8 * PAGE);
        dealloc(p, c, 8 * PAGE);
        dealloc(p, e, 8 * PAGE);
    }
    dealloc(p, model, 20 * PAGE);
}

START_TEST(pages_move_once_per_mark)
{
    crmm_resource *p = expandable_pool("");
    replay_training(p);
    int maps = fake_vmm.maps, unmaps = fake_vmm.unmaps;
    fake_vmm.device_syncs = 0;
    /* moving pages at every step would synchronize every step: after one move the pool raises its
     * mark instead, so repeats of the sequence make no driver call at all */
    replay_training(p);
    replay_training(p);
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_int_eq(fake_vmm.maps - maps, 0);
    ck_assert_int_eq(fake_vmm.unmaps - unmaps, 0);
    /* at the price of one A more than the peak of live bytes (the model, C, B1 and B2) */
    ck_assert_uint_le(q(p, CRMM_QUERY_BYTES_RESERVED), (20 + 8 + 16 + 16 + 8) * PAGE);
    books_agree(p);
    crmm_resource_release(p);
}
END_TEST

START_TEST(release_threshold_keeps_free_pages)
{
    char params[64];
    snprintf(params, sizeof params, "release_threshold=%zu", 3 * PAGE);
    crmm_resource *p = expandable_pool(params);
    unsigned char *x = alloc(p, 3 * PAGE), *y = alloc(p, PAGE);
    dealloc(p, x, 3 * PAGE);
    fake_vmm.device_syncs = 0;
    unsigned char *z = alloc(p, 4 * PAGE); /* 3 free pages are within the threshold: grow instead */
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 8 * PAGE);
    dealloc(p, z, 4 * PAGE);
    /* trim keeps 3 pages of the 7 free ones */
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * PAGE);
    books_agree(p);
    dealloc(p, y, PAGE);
    crmm_resource_release(p);
}
END_TEST

START_TEST(trim_gives_every_free_page_back)
{
    crmm_resource *p = expandable_pool("");
    unsigned char *a = alloc(p, 5 * PAGE + 100), *b = alloc(p, 2 * PAGE);
    dealloc(p, a, 5 * PAGE + 100);
    fake_vmm.device_syncs = 0;
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(fake_vmm.device_syncs, 1);
    /* the page a shares with b stays; a's five pages below it go */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 3 * PAGE);
    books_agree(p);
    b[0] = 1; /* still mapped */
    dealloc(p, b, 2 * PAGE);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    ck_assert_uint_eq(fake_vmm.physical, 0);
    /* a trim with nothing to give back makes no CUDA call */
    fake_vmm.device_syncs = 0;
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    /* and the pool grows again where it gave back */
    unsigned char *c = alloc(p, PAGE);
    ck_assert_ptr_eq(c, a);
    dealloc(p, c, PAGE);
    crmm_resource_release(p);
}
END_TEST

START_TEST(initial_size_is_mapped_at_creation_and_kept)
{
    char params[64];
    snprintf(params, sizeof params, "initial_size=%zu", 4 * PAGE);
    crmm_resource *p = expandable_pool(params);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * PAGE);
    unsigned char *a = alloc(p, 6 * PAGE);
    dealloc(p, a, 6 * PAGE);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * PAGE);
    books_agree(p);
    crmm_resource_release(p);
}
END_TEST

START_TEST(maximum_size_bounds_what_it_maps)
{
    char params[64];
    snprintf(params, sizeof params, "maximum_size=%zu", 4 * PAGE);
    crmm_resource *p = expandable_pool(params);
    unsigned char *a = alloc(p, 3 * PAGE);
    void *x = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(p, 2 * PAGE, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(x);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "maximum size"));
    unsigned char *b = alloc(p, PAGE); /* what is left still serves */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 4 * PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_MAXIMUM_SIZE), 4 * PAGE);
    dealloc(p, a, 3 * PAGE);
    dealloc(p, b, PAGE);
    crmm_resource_release(p);
}
END_TEST

START_TEST(out_of_device_memory_gives_free_pages_back_and_retries)
{
    /* a release threshold that would keep the free pages: only running out of memory frees them */
    char params[64];
    snprintf(params, sizeof params, "release_threshold=%zu", 64 * PAGE);
    crmm_resource *p = expandable_pool(params);
    unsigned char *a = alloc(p, 4 * PAGE), *b = alloc(p, 2 * PAGE);
    dealloc(p, a, 4 * PAGE);
    fake_vmm.physical_limit = 8 * PAGE;
    unsigned char *c = alloc(p, 6 * PAGE); /* 6 new pages do not fit beside the 6 held: a's 4 go */
    ck_assert_uint_le(fake_vmm.physical_peak, 8 * PAGE);
    books_agree(p);
    void *x = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(p, 4 * PAGE, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(x);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "out of memory"));
    books_agree(p); /* a failed growth leaves nothing behind */
    dealloc(p, b, 2 * PAGE);
    dealloc(p, c, 6 * PAGE);
    unsigned char *d = alloc(p, 8 * PAGE); /* and the pool still serves */
    dealloc(p, d, 8 * PAGE);
    crmm_resource_release(p);
    ck_assert_uint_eq(fake_vmm.physical, 0);
}
END_TEST

START_TEST(a_huge_request_is_out_of_memory)
{
    crmm_resource *p = expandable_pool("");
    void *x = (void *)1;
    /* more than the device has fails without asking the driver for memory */
    ck_assert_crmm(crmm_resource_allocate(p, DEVICE_MEMORY + PAGE, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "more than the device's"));
    ck_assert_int_eq(fake_vmm.creates, 0);
    ck_assert_crmm(crmm_resource_allocate(p, (size_t)1 << 50, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(x);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "address range"));
    ck_assert_crmm(crmm_resource_allocate(p, SIZE_MAX - 10, NULL, &x), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    crmm_resource_release(p);
}
END_TEST

START_TEST(destroy_unmaps_and_frees_everything)
{
    crmm_resource *p = expandable_pool("");
    unsigned char *a = alloc(p, 3 * PAGE);
    (void)alloc(p, PAGE); /* left live: reported, and still given back */
    dealloc(p, a, 3 * PAGE);
    fake_vmm.device_syncs = 0;
    crmm_test_log_capture_begin();
    crmm_resource_release(p);
    char *log = crmm_test_log_capture_end();
    ck_assert_ptr_nonnull(strstr(log, "1 live allocation"));
    free(log);
    ck_assert_int_eq(fake_vmm.device_syncs, 1);
    ck_assert_uint_eq(fake_vmm.physical, 0);
    ck_assert_int_eq(fake_vmm.frees, 1);
    ck_assert_uint_eq(fake_vmm.range, 0);
}
END_TEST

START_TEST(bad_frees_are_refused)
{
    crmm_resource *p = expandable_pool("");
    unsigned char *a = alloc(p, 1000);
    dealloc(p, a, 1000);
    ck_assert_crmm(crmm_resource_deallocate(p, a, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    unsigned char *b = alloc(p, 4 * PAGE);
    ck_assert_crmm(crmm_resource_deallocate(p, b + 256, 1000, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    int local;
    ck_assert_crmm(crmm_resource_deallocate(p, &local, 4, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    dealloc(p, b, 4 * PAGE);
    books_agree(p);
    crmm_resource_release(p);
}
END_TEST

START_TEST(another_streams_free_memory_is_not_used_without_a_wait)
{
    crmm_resource *p = expandable_pool("release_threshold=1TiB"); /* no release: growth only */
    cudaStream_t s = stream_n(0), t = stream_n(1);
    unsigned char *a = alloc_on(p, 2 * PAGE, s);
    free_on(p, a, 2 * PAGE, t); /* free on t, right at the bottom */
    fake_vmm.device_syncs = 0;
    /* s needs 3 pages: t's 2 free pages next to the unmapped range may not join s's new pages
     * unless the device is synchronized; the pool maps 3 fresh pages above them instead... */
    unsigned char *b = alloc_on(p, 3 * PAGE, s);
    ck_assert_ptr_eq(b, a + 2 * PAGE);
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    /* ...while t reuses its own pages at once */
    unsigned char *c = alloc_on(p, 2 * PAGE, t);
    ck_assert_ptr_eq(c, a);
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    free_on(p, b, 3 * PAGE, s);
    free_on(p, c, 2 * PAGE, t);
    crmm_resource_release(p);
}
END_TEST

START_TEST(memory_keeps_its_content_and_the_books_stay_exact)
{
    /* a random mix of sizes on two streams, with trims, checking every block's bytes */
    crmm_resource *p = expandable_pool("");
    enum { SLOTS = 64 };
    unsigned char *ptr[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    uint64_t rng = 42;
    for (int step = 0; step < 4000; step++) {
        int i = (int)(crmm_test_rand(&rng) % SLOTS);
        cudaStream_t s = stream_n(i % 2);
        if (ptr[i]) {
            for (size_t k = 0; k < size[i]; k += 997)
                ck_assert_uint_eq(ptr[i][k], (unsigned char)i);
            free_on(p, ptr[i], size[i], s);
            ptr[i] = NULL;
        } else {
            size[i] = 1 + crmm_test_rand(&rng) % (crmm_test_rand(&rng) % 2 ? 300 * KiB : 4 * KiB);
            ptr[i] = alloc_on(p, size[i], s);
            memset(ptr[i], i, size[i]);
        }
        if (step % 500 == 499) {
            ck_assert_crmm_ok(crmm_resource_trim(p));
            books_agree(p);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (ptr[i])
            free_on(p, ptr[i], size[i], stream_n(i % 2));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0);
    books_agree(p);
    crmm_resource_release(p);
    ck_assert_uint_eq(fake_vmm.physical, 0);
}
END_TEST

struct stress_arg { crmm_resource *p; int id; };

static void *stress_thread(void *arg)
{
    struct stress_arg *a = arg;
    cudaStream_t s = stream_n(a->id);
    uint64_t rng = 7 + (uint64_t)a->id;
    unsigned char *live[32] = {0};
    size_t size[32] = {0};
    for (int step = 0; step < 3000; step++) {
        int i = (int)(crmm_test_rand(&rng) % 32);
        if (live[i]) {
            if (live[i][0] != (unsigned char)a->id || live[i][size[i] - 1] != (unsigned char)a->id)
                return "corrupted";
            if (crmm_resource_deallocate(a->p, live[i], size[i], (crmm_cuda_stream_t)s) != CRMM_OK)
                return "free failed";
            live[i] = NULL;
        } else {
            size[i] = 1 + crmm_test_rand(&rng) % (200 * KiB);
            void *x;
            if (crmm_resource_allocate(a->p, size[i], (crmm_cuda_stream_t)s, &x) != CRMM_OK)
                return "allocate failed";
            live[i] = x;
            memset(x, a->id, size[i]);
        }
    }
    for (int i = 0; i < 32; i++)
        if (live[i])
            crmm_resource_deallocate(a->p, live[i], size[i], (crmm_cuda_stream_t)s);
    return NULL;
}

START_TEST(threads_on_their_own_streams)
{
    crmm_resource *p = expandable_pool("");
    pthread_t th[4];
    struct stress_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct stress_arg){p, i + 1};
        ck_assert_int_eq(pthread_create(&th[i], NULL, stress_thread, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        ck_assert_msg(r == NULL, "thread %d: %s", i, (const char *)r);
    }
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    books_agree(p);
    crmm_resource_release(p);
}
END_TEST

static void *allocate_one_page(void *arg)
{
    void *x = NULL;
    return crmm_resource_allocate(arg, PAGE, NULL, &x) == CRMM_OK ? x : NULL;
}

START_TEST(under_threads_growth_takes_a_step_and_never_waits)
{
    crmm_resource *p = expandable_pool("thread_cache=on");
    unsigned char *base = alloc(p, 64 * PAGE); /* one thread so far: exactly what it needs */
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 64 * PAGE);
    /* a second thread allocates: the caches switch on, and its growth of one page maps a 16th of
     * the pool; the three pages over stay free */
    pthread_t t;
    void *w = NULL;
    ck_assert_int_eq(pthread_create(&t, NULL, allocate_one_page, p), 0);
    ck_assert_int_eq(pthread_join(t, &w), 0);
    ck_assert_ptr_nonnull(w);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 68 * PAGE);
    unsigned char *x = alloc(p, 3 * PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 68 * PAGE);
    dealloc(p, base, 64 * PAGE);
    /* past the mark with 64 pages free that could move: no synchronization, nothing unmapped,
     * new pages (at least a 16th of the pool) instead */
    fake_vmm.device_syncs = 0;
    int unmaps = fake_vmm.unmaps;
    unsigned char *z = alloc(p, 80 * PAGE);
    ck_assert_int_eq(fake_vmm.device_syncs, 0);
    ck_assert_int_eq(fake_vmm.unmaps, unmaps);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 148 * PAGE);
    books_agree(p);
    dealloc(p, z, 80 * PAGE);
    dealloc(p, x, 3 * PAGE);
    dealloc(p, w, PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    ck_assert_crmm_ok(crmm_resource_trim(p));
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 0); /* trim still gives every free page back */
    books_agree(p);
    crmm_resource_release(p);
}
END_TEST

/* The worker of cached_pages_serve_a_growth_at_the_maximum: 64 one-page blocks, every other one
 * of the first 62 freed into its cache; then it waits, caches intact, until the test is done. */
struct cacher { crmm_resource *p; pthread_barrier_t *sync; unsigned char *blocks[64]; const char *err; };

static void *fill_and_cache(void *arg)
{
    struct cacher *c = arg;
    for (int i = 0; i < 64 && !c->err; i++)
        if (crmm_resource_allocate(c->p, PAGE, NULL, (void **)&c->blocks[i]) != CRMM_OK)
            c->err = "allocate failed";
    for (int i = 1; i < 62 && !c->err; i += 2) {
        if (crmm_resource_deallocate(c->p, c->blocks[i], PAGE, NULL) != CRMM_OK)
            c->err = "free failed";
        c->blocks[i] = NULL;
    }
    pthread_barrier_wait(c->sync); /* the test allocates */
    pthread_barrier_wait(c->sync); /* and is done */
    for (int i = 0; i < 64; i++)
        if (c->blocks[i] && crmm_resource_deallocate(c->p, c->blocks[i], PAGE, NULL) != CRMM_OK)
            c->err = "free failed";
    return NULL;
}

START_TEST(cached_pages_serve_a_growth_at_the_maximum)
{
    /* the pool is at its maximum, another thread's cache holds 31 of its 64 pages (less than
     * half: a growth leaves that cache alone) in one-page pieces: a request of 8 pages must get
     * them back, unmapped and mapped again in one piece, not fail */
    crmm_resource *p = expandable_pool("maximum_size=4MiB thread_cache=on");
    dealloc(p, alloc(p, 256), 256); /* this thread first: the worker's allocations switch the caches on */
    pthread_barrier_t sync;
    pthread_barrier_init(&sync, NULL, 2);
    struct cacher c = {.p = p, .sync = &sync};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fill_and_cache, &c), 0);
    pthread_barrier_wait(&sync);
    ck_assert_msg(!c.err, "worker: %s", c.err);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_RESERVED), 64 * PAGE);
    void *x = NULL;
    crmm_status st = crmm_resource_allocate(p, 8 * PAGE, NULL, &x);
    pthread_barrier_wait(&sync);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_msg(st == CRMM_OK, "8 pages at the maximum: %s", crmm_last_error());
    memset(x, 0x5A, 8 * PAGE);
    ck_assert_uint_le(q(p, CRMM_QUERY_BYTES_RESERVED), 64 * PAGE);
    ck_assert_msg(!c.err, "worker: %s", c.err);
    dealloc(p, x, 8 * PAGE);
    ck_assert_uint_eq(q(p, CRMM_QUERY_BYTES_IN_USE), 0);
    books_agree(p);
    pthread_barrier_destroy(&sync);
    crmm_resource_release(p);
}
END_TEST

/* Falls back to growth by upstream chunks, with a warning that says why. */
static void check_fallback(const char *why)
{
    crmm_test_log_capture_begin();
    crmm_resource *p = expandable_pool("initial_size=1MiB");
    char *log = crmm_test_log_capture_end();
    ck_assert_msg(strstr(log, "expandable = true, but") && strstr(log, why), "log: %s", log);
    free(log);
    ck_assert_int_eq(fake_vmm.reserves, 0);
    ck_assert_int_eq(fake_vmm.upstream_calls, 1); /* the initial chunk came from upstream */
    unsigned char *a = alloc(p, 2 * MiB);              /* and growth does too */
    ck_assert_int_eq(fake_vmm.upstream_calls, 2);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    dealloc(p, a, 2 * MiB);
    crmm_resource_release(p);
}

START_TEST(without_the_driver_api_it_grows_from_upstream)
{
    fake_vmm.lookups_fail = 1;
    check_fallback("the CUDA driver has no cuMem");
}
END_TEST

START_TEST(on_a_device_without_virtual_memory_it_grows_from_upstream)
{
    fake_vmm.vmm_unsupported = 1;
    check_fallback("does not support the CUDA virtual memory API");
}
END_TEST

START_TEST(over_host_memory_it_grows_from_upstream)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    crmm_test_log_capture_begin();
    crmm_resource *p = crmm_test_create("pool", "expandable=true initial_size=1MiB", host);
    char *log = crmm_test_log_capture_end();
    ck_assert_msg(strstr(log, "not a base resource of device memory"), "log: %s", log);
    free(log);
    crmm_resource_release(host);
    unsigned char *a = alloc(p, 2 * MiB);
    ck_assert_uint_eq(q(p, CRMM_QUERY_UPSTREAM_BLOCKS), 2);
    dealloc(p, a, 2 * MiB);
    crmm_resource_release(p);
    ck_assert_int_eq(fake_vmm.reserves, 0);
}
END_TEST

START_TEST(bad_parameters_are_refused)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *p = NULL;
    ck_assert_crmm(crmm_resource_create("pool", "expandable=maybe initial_size=1MiB", host, &p), CRMM_ERROR_CONFIG);
    ck_assert_crmm(crmm_resource_create("pool", "release_threshold=lots initial_size=1MiB", host, &p), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(p);
    crmm_resource_release(host);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool_expandable");
    TCase *tc = tcase_create("pool_expandable");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, it_maps_what_it_needs_and_never_asks_the_upstream);
    tcase_add_test(tc, free_blocks_merge_across_growth_steps);
    tcase_add_test(tc, a_wrong_size_is_refused);
    tcase_add_test(tc, growth_joins_the_free_block_below);
    tcase_add_test(tc, growth_maps_freed_pages_again_instead_of_new_memory);
    tcase_add_test(tc, growth_below_the_high_water_mark_does_not_wait);
    tcase_add_test(tc, growth_past_the_mark_moves_only_the_pages_it_needs);
    tcase_add_test(tc, growth_within_the_slack_above_the_mark_does_not_wait);
    tcase_add_test(tc, pages_move_once_per_mark);
    tcase_add_test(tc, release_threshold_keeps_free_pages);
    tcase_add_test(tc, trim_gives_every_free_page_back);
    tcase_add_test(tc, initial_size_is_mapped_at_creation_and_kept);
    tcase_add_test(tc, maximum_size_bounds_what_it_maps);
    tcase_add_test(tc, out_of_device_memory_gives_free_pages_back_and_retries);
    tcase_add_test(tc, a_huge_request_is_out_of_memory);
    tcase_add_test(tc, destroy_unmaps_and_frees_everything);
    tcase_add_test(tc, bad_frees_are_refused);
    tcase_add_test(tc, another_streams_free_memory_is_not_used_without_a_wait);
    tcase_add_test(tc, memory_keeps_its_content_and_the_books_stay_exact);
    tcase_add_test(tc, threads_on_their_own_streams);
    tcase_add_test(tc, under_threads_growth_takes_a_step_and_never_waits);
    tcase_add_test(tc, cached_pages_serve_a_growth_at_the_maximum);
    tcase_add_test(tc, without_the_driver_api_it_grows_from_upstream);
    tcase_add_test(tc, on_a_device_without_virtual_memory_it_grows_from_upstream);
    tcase_add_test(tc, over_host_memory_it_grows_from_upstream);
    tcase_add_test(tc, bad_parameters_are_refused);
    suite_add_tcase(s, tc);
    return crmm_test_run(s);
}
