/* conformance.c — the conformance suite run over every resource chain. See conformance.h.
 *
 * Each test is a Check loop test whose index picks the chain; the chain table is a static set
 * before the runner forks, so every forked test sees it. Memory is checked through the way it
 * can be reached: host-accessible memory with memset/compare, device memory with
 * cudaMemset/cudaMemcpy. */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "conformance.h"
#include "test_support.h"

/* Every chain added by crmm_conformance_add calls so far (a program may call it more than once). */
#define MAX_CHAINS 64
static crmm_test_chain chains[MAX_CHAINS];
static int nchains;

typedef struct chain_ctx {
    const crmm_test_chain *chain;
    crmm_config *cfg;
    crmm_resource *mr;
    crmm_cuda_stream_t s1, s2;
} chain_ctx;

static void open_chain(int i, chain_ctx *c)
{
    memset(c, 0, sizeof *c);
    c->chain = &chains[i];
    ck_assert_crmm_ok(crmm_config_load_string(c->chain->config, c->chain->label, &c->cfg));
    ck_assert_crmm_ok(crmm_config_create_resource(c->cfg, c->chain->resource, -1, &c->mr));
    ck_assert_ptr_nonnull(c->mr);
    if (c->chain->gpu) {
        ck_assert_int_eq(cudaStreamCreateWithFlags((cudaStream_t *)&c->s1, cudaStreamNonBlocking), cudaSuccess);
        ck_assert_int_eq(cudaStreamCreateWithFlags((cudaStream_t *)&c->s2, cudaStreamNonBlocking), cudaSuccess);
    }
}

static void close_chain(chain_ctx *c)
{
    if (c->chain->gpu) {
        cudaStreamSynchronize((cudaStream_t)c->s1);
        cudaStreamSynchronize((cudaStream_t)c->s2);
        cudaStreamDestroy((cudaStream_t)c->s1);
        cudaStreamDestroy((cudaStream_t)c->s2);
    }
    crmm_resource_release(c->mr);
    crmm_config_free(c->cfg);
}

/* Fill a block with `tag` (the whole block when host-accessible; device memory with cudaMemset
 * on `stream`). */
static void fill(chain_ctx *c, void *p, size_t n, unsigned char tag, crmm_cuda_stream_t stream)
{
    if (crmm_resource_is_host_accessible(c->mr) && !c->chain->gpu) {
        memset(p, tag, n);
    } else {
        ck_assert_int_eq(cudaMemsetAsync(p, tag, n, (cudaStream_t)stream), cudaSuccess);
    }
}

/* Check the first and last byte (all of it for host memory) still hold `tag`. */
static void check(chain_ctx *c, void *p, size_t n, unsigned char tag, crmm_cuda_stream_t stream)
{
    if (crmm_resource_is_host_accessible(c->mr) && !c->chain->gpu) {
        const unsigned char *b = p;
        for (size_t k = 0; k < n; k++)
            if (b[k] != tag)
                ck_abort_msg("%s: byte %zu of a %zu-byte block is %u, expected %u", c->chain->label, k, n, b[k], tag);
    } else {
        unsigned char first = 0, last = 0;
        ck_assert_int_eq(cudaMemcpyAsync(&first, p, 1, cudaMemcpyDefault, (cudaStream_t)stream), cudaSuccess);
        ck_assert_int_eq(cudaMemcpyAsync(&last, (char *)p + n - 1, 1, cudaMemcpyDefault, (cudaStream_t)stream), cudaSuccess);
        ck_assert_int_eq(cudaStreamSynchronize((cudaStream_t)stream), cudaSuccess);
        ck_assert_uint_eq(first, tag);
        ck_assert_uint_eq(last, tag);
    }
}

START_TEST(zero_size_gives_null)
{
    chain_ctx c;
    open_chain(_i, &c);
    void *p = (void *)0x1;
    ck_assert_crmm_ok(crmm_resource_allocate(c.mr, 0, c.s1, &p));
    ck_assert_ptr_null(p);
    ck_assert_crmm_ok(crmm_resource_deallocate(c.mr, NULL, 0, c.s1));
    ck_assert_crmm_ok(crmm_resource_deallocate(c.mr, NULL, 128, c.s1));
    close_chain(&c);
}

START_TEST(sizes_are_aligned_and_usable)
{
    chain_ctx c;
    open_chain(_i, &c);
    size_t max = c.chain->max_size ? c.chain->max_size : (size_t)1 << 30;
    const size_t sizes[] = {4, 1024, (size_t)1 << 20, (size_t)1 << 30};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        if (sizes[k] > max)
            continue;
        void *p = NULL;
        ck_assert_crmm_ok(crmm_resource_allocate(c.mr, sizes[k], c.s1, &p));
        ck_assert_ptr_nonnull(p);
        ck_assert_msg(((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT) == 0, "%s: %zu bytes at %p: not 256-byte aligned",
                      c.chain->label, sizes[k], p);
        size_t touch = sizes[k] > 4096 ? 4096 : sizes[k];
        fill(&c, p, touch, (unsigned char)(0x40 + k), c.s1);
        check(&c, p, touch, (unsigned char)(0x40 + k), c.s1);
        ck_assert_crmm_ok(crmm_resource_deallocate(c.mr, p, sizes[k], c.s1));
    }
    close_chain(&c);
}

START_TEST(one_pib_is_out_of_memory)
{
    chain_ctx c;
    open_chain(_i, &c);
    void *p = (void *)0x1;
    crmm_clear_error();
    crmm_status st = crmm_resource_allocate(c.mr, (size_t)1 << 50, c.s1, &p);
    ck_assert_msg(st == CRMM_ERROR_OUT_OF_MEMORY, "%s: 1 PiB gave %s: %s", c.chain->label, crmm_status_name(st),
                  crmm_last_error());
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(crmm_last_error(), "out of memory") != NULL, "message: %s", crmm_last_error());
    /* the resource still works */
    ck_assert_crmm_ok(crmm_resource_allocate(c.mr, 4096, c.s1, &p));
    ck_assert_ptr_nonnull(p);
    ck_assert_crmm_ok(crmm_resource_deallocate(c.mr, p, 4096, c.s1));
    close_chain(&c);
}

typedef struct block { uintptr_t p; size_t n; } block;

static int by_address(const void *a, const void *b)
{
    uintptr_t x = ((const block *)a)->p, y = ((const block *)b)->p;
    return x < y ? -1 : x > y;
}

START_TEST(blocks_are_distinct)
{
    chain_ctx c;
    open_chain(_i, &c);
    enum { N = 200 };
    block b[N];
    uint64_t seed = 42;
    for (int k = 0; k < N; k++) {
        b[k].n = 1 + crmm_test_rand(&seed) % 65536;
        void *p;
        ck_assert_crmm_ok(crmm_resource_allocate(c.mr, b[k].n, c.s1, &p));
        ck_assert(((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT) == 0);
        b[k].p = (uintptr_t)p;
    }
    block sorted[N];
    memcpy(sorted, b, sizeof b);
    qsort(sorted, N, sizeof sorted[0], by_address);
    for (int k = 1; k < N; k++)
        ck_assert_msg(sorted[k - 1].p + sorted[k - 1].n <= sorted[k].p, "%s: blocks %#lx+%zu and %#lx overlap",
                      c.chain->label, (unsigned long)sorted[k - 1].p, sorted[k - 1].n, (unsigned long)sorted[k].p);
    for (int k = 0; k < N; k++)
        ck_assert_crmm_ok(crmm_resource_deallocate(c.mr, (void *)b[k].p, b[k].n, c.s1));
    close_chain(&c);
}

/* Random allocate/free with each block tagged and checked before its free. */
static void random_mix(chain_ctx *c, uint64_t seed, int steps, crmm_cuda_stream_t stream)
{
    enum { LIVE = 64 };
    block live[LIVE];
    unsigned char tag[LIVE];
    int n = 0;
    bool gpu = c->chain->gpu;
    for (int s = 0; s < steps; s++) {
        uint64_t r = crmm_test_rand(&seed);
        if (n == 0 || (n < LIVE && (r & 1))) {
            size_t size = 1 + (crmm_test_rand(&seed) % (gpu ? (1u << 20) : (1u << 16)));
            void *p;
            ck_assert_crmm_ok(crmm_resource_allocate(c->mr, size, stream, &p));
            ck_assert(((uintptr_t)p % CRMM_ALLOCATION_ALIGNMENT) == 0);
            live[n] = (block){(uintptr_t)p, size};
            tag[n] = (unsigned char)(r >> 8);
            if (!gpu || (s % 16) == 0)
                fill(c, p, size, tag[n], stream);
            else
                tag[n] = 0; /* untagged */
            n++;
        } else {
            int k = (int)((r >> 16) % (uint64_t)n);
            if (!gpu || tag[k])
                check(c, (void *)live[k].p, live[k].n, tag[k], stream);
            ck_assert_crmm_ok(crmm_resource_deallocate(c->mr, (void *)live[k].p, live[k].n, stream));
            live[k] = live[n - 1];
            tag[k] = tag[n - 1];
            n--;
        }
    }
    while (n > 0) {
        n--;
        ck_assert_crmm_ok(crmm_resource_deallocate(c->mr, (void *)live[n].p, live[n].n, stream));
    }
}

START_TEST(random_alloc_free_mix)
{
    chain_ctx c;
    open_chain(_i, &c);
    random_mix(&c, 7, c.chain->gpu ? 2000 : 5000, c.s1);
    close_chain(&c);
}

typedef struct thread_arg { chain_ctx *c; uint64_t seed; crmm_cuda_stream_t stream; } thread_arg;

static void *mix_thread(void *arg)
{
    thread_arg *a = arg;
    random_mix(a->c, a->seed, a->c->chain->gpu ? 1000 : 3000, a->stream);
    return NULL;
}

START_TEST(four_threads_mix)
{
    chain_ctx c;
    open_chain(_i, &c);
    pthread_t t[4];
    thread_arg a[4];
    for (int k = 0; k < 4; k++) {
        a[k] = (thread_arg){&c, 1000 + (uint64_t)k, NULL};
        if (c.chain->gpu)
            ck_assert_int_eq(cudaStreamCreateWithFlags((cudaStream_t *)&a[k].stream, cudaStreamNonBlocking), cudaSuccess);
        ck_assert_int_eq(pthread_create(&t[k], NULL, mix_thread, &a[k]), 0);
    }
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(pthread_join(t[k], NULL), 0);
    for (int k = 0; k < 4; k++)
        if (c.chain->gpu) {
            cudaStreamSynchronize((cudaStream_t)a[k].stream);
            cudaStreamDestroy((cudaStream_t)a[k].stream);
        }
    close_chain(&c);
}

typedef struct free_arg { crmm_resource *mr; void *p; size_t n; crmm_status st; } free_arg;

static void *free_thread(void *arg)
{
    free_arg *f = arg;
    f->st = crmm_resource_deallocate(f->mr, f->p, f->n, NULL);
    return NULL;
}

START_TEST(free_on_another_thread)
{
    chain_ctx c;
    open_chain(_i, &c);
    for (int round = 0; round < 50; round++) {
        void *p;
        size_t n = 1000 + (size_t)round * 997;
        ck_assert_crmm_ok(crmm_resource_allocate(c.mr, n, NULL, &p));
        free_arg f = {c.mr, p, n, CRMM_ERROR_STATE};
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, free_thread, &f), 0);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
        ck_assert_crmm_ok(f.st);
    }
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(c.mr, 4096, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(c.mr, p, 4096, NULL));
    close_chain(&c);
}

START_TEST(free_on_another_stream)
{
    chain_ctx c;
    open_chain(_i, &c);
    if (!c.chain->gpu) {
        close_chain(&c);
        return; /* host chains have no streams: covered by free_on_another_thread */
    }
    void *ps[32];
    for (int k = 0; k < 32; k++) {
        ck_assert_crmm_ok(crmm_resource_allocate(c.mr, 4096 * (size_t)(k + 1), c.s1, &ps[k]));
        fill(&c, ps[k], 4096 * (size_t)(k + 1), 0x5a, c.s1);
    }
    ck_assert_int_eq(cudaStreamSynchronize((cudaStream_t)c.s1), cudaSuccess);
    for (int k = 0; k < 32; k++)
        ck_assert_crmm_ok(crmm_resource_deallocate(c.mr, ps[k], 4096 * (size_t)(k + 1), c.s2));
    for (int k = 0; k < 32; k++) {
        ck_assert_crmm_ok(crmm_resource_allocate(c.mr, 4096 * (size_t)(k + 1), c.s1, &ps[k]));
        fill(&c, ps[k], 4096 * (size_t)(k + 1), 0x3c, c.s1);
        check(&c, ps[k], 4096 * (size_t)(k + 1), 0x3c, c.s1);
    }
    for (int k = 0; k < 32; k++)
        ck_assert_crmm_ok(crmm_resource_deallocate(c.mr, ps[k], 4096 * (size_t)(k + 1), c.s1));
    close_chain(&c);
}

START_TEST(in_use_query_follows_allocations)
{
    chain_ctx c;
    open_chain(_i, &c);
    uint64_t before, during, after;
    if (crmm_resource_query(c.mr, CRMM_QUERY_BYTES_IN_USE, &before) != CRMM_OK) {
        close_chain(&c);
        return; /* the chain's top resource does not count bytes */
    }
    void *p[10];
    for (int k = 0; k < 10; k++)
        ck_assert_crmm_ok(crmm_resource_allocate(c.mr, 1000, c.s1, &p[k]));
    ck_assert_crmm_ok(crmm_resource_query(c.mr, CRMM_QUERY_BYTES_IN_USE, &during));
    ck_assert_msg(during >= before + 10000, "%s: in use %llu after 10 x 1000 B (was %llu)", c.chain->label,
                  (unsigned long long)during, (unsigned long long)before);
    for (int k = 0; k < 10; k++)
        ck_assert_crmm_ok(crmm_resource_deallocate(c.mr, p[k], 1000, c.s1));
    ck_assert_crmm_ok(crmm_resource_query(c.mr, CRMM_QUERY_BYTES_IN_USE, &after));
    ck_assert_uint_eq(after, before);
    close_chain(&c);
}

void crmm_conformance_add(Suite *s, const crmm_test_chain *table, int n)
{
    for (int k = 0; k < n; k++) {
        if (nchains >= MAX_CHAINS) {
            fprintf(stderr, "conformance: more than %d chains\n", MAX_CHAINS);
            exit(1);
        }
        int i = nchains++;
        chains[i] = table[k];
        static char names[MAX_CHAINS][96];
        char *name = names[i];
        snprintf(name, sizeof names[0], "conformance_%s", chains[i].label);
        TCase *tc = crmm_test_tcase(s, name, chains[i].gpu ? CRMM_TEST_GPU_TIMEOUT : 60);
        tcase_add_loop_test(tc, zero_size_gives_null, i, i + 1);
        tcase_add_loop_test(tc, sizes_are_aligned_and_usable, i, i + 1);
        tcase_add_loop_test(tc, one_pib_is_out_of_memory, i, i + 1);
        tcase_add_loop_test(tc, blocks_are_distinct, i, i + 1);
        tcase_add_loop_test(tc, random_alloc_free_mix, i, i + 1);
        tcase_add_loop_test(tc, four_threads_mix, i, i + 1);
        tcase_add_loop_test(tc, free_on_another_thread, i, i + 1);
        tcase_add_loop_test(tc, free_on_another_stream, i, i + 1);
        tcase_add_loop_test(tc, in_use_query_follows_allocations, i, i + 1);
    }
}
