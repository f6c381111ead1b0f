/* check_arena_gpu.c — the arena over device memory (the cuda plugin): the conformance suite, the
 * default size, and the stream-ordered contract when memory moves between streams, threads and
 * the global arena (which hands memory freed on one stream to another only after a device
 * synchronization, also when the freeing stream is gone). Streams are made "slow" with a host
 * function that sleeps, so that a missing wait shows as the wrong bytes. Skips (77) without a
 * GPU. */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include "conformance.h"
#include "arena_test.h"
#include "gpu_streams_test.h"
#include "streams_test.h"

#define SLOW_MS 200 /* how long a held stream stays busy */

static const crmm_test_chain gpu_chains[] = {
    {"arena_over_cuda", "[resource.gpu]\nplugin = cuda\n[resource.a]\nplugin = arena\nupstream = gpu\narena_size = 2GiB\n",
     "a", 1, 0},
    {"arena_64k_superblocks_over_cuda",
     "[resource.gpu]\nplugin = cuda\n[resource.a]\nplugin = arena\nupstream = gpu\narena_size = 1100MiB\n"
     "superblock_size = 64KiB\n",
     "a", 1, 0},
};

/* In a test: p (n bytes of mr) written with `fill` on `from` behind slow work and freed there at
 * once; then n bytes allocated on `to`, returned. */
static void *move_block(crmm_resource *mr, void *p, size_t n, cudaStream_t from, unsigned char fill, cudaStream_t to)
{
    hold_stream(from, SLOW_MS);
    ck_assert_cuda(cudaMemsetAsync(p, fill, n, from));
    free_on(mr, p, n, from);
    return alloc_on(mr, n, to);
}

/* In a test: q (n bytes) written with `fill` on t; once t and the earlier writer s (the whole
 * device when s is NULL: the writer's stream is gone or another thread's) are done, q holds
 * `fill` only. */
static void write_and_expect(void *q, size_t n, unsigned char fill, cudaStream_t t, cudaStream_t s)
{
    ck_assert_cuda(cudaMemsetAsync(q, fill, n, t));
    ck_assert_cuda(cudaStreamSynchronize(t));
    ck_assert_cuda(s ? cudaStreamSynchronize(s) : cudaDeviceSynchronize());
    expect_device_bytes(q, n, fill);
}

/* In a test: streams s and t (either may be NULL) destroyed, every block of f back, f dropped. */
static void drop_streams_and_arena(fixture *f, cudaStream_t s, cudaStream_t t)
{
    if (s)
        ck_assert_cuda(cudaStreamDestroy(s));
    if (t)
        ck_assert_cuda(cudaStreamDestroy(t));
    ck_assert_uint_eq(crmm_test_query(f->mr, CRMM_QUERY_ALLOCATIONS), 0); /* every block came back */
    drop_arena(f);
}

CRMM_TEST_IN("arena_gpu", default_size_is_at_most_half_the_memory)
{
    /* half the free memory at creation: other programs may take or give memory back meanwhile,
     * so the exact rule is tested against the scripted driver (check_pool_expandable_use) */
    crmm_resource *gpu = crmm_test_create("cuda", "", NULL);
    size_t free_bytes = 0, total = 0;
    ck_assert_cuda(cudaMemGetInfo(&free_bytes, &total));
    crmm_resource *mr = crmm_test_create("arena", "", gpu);
    uint64_t size = crmm_test_query(mr, CRMM_QUERY_BYTES_RESERVED);
    ck_assert_msg(size > 0 && size <= total / 2, "arena of %llu bytes of %zu", (unsigned long long)size, total);
    void *p = alloc_on(mr, 1000, cudaStreamPerThread);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, CRMM_CUDA_STREAM_PER_THREAD));
    crmm_resource_release(mr);
    crmm_resource_release(gpu);
}

/* The test: a block written on S behind slow work, freed on S, then allocated on T and
 * written there must end up with T's bytes — for a small block (thread arenas), a large one
 * (the global arena) and one larger than a shard (across two of the four shards of 64 MiB).
 * T may be given other memory than S's (the 4 MiB block comes from T's home shard, which needs
 * no wait); a_large_block_moves_to_another_stream_after_its_work makes T take S's. */
CRMM_TEST_IN("arena_gpu", reuse_on_another_stream_is_ordered)
{
    fixture f = make_arena_over("cuda", "arena_size=256MiB");
    ck_assert_uint_eq(stats(f.mr).shards, 4);
    cudaStream_t s = new_stream(), t = new_stream();
    const size_t sizes[] = {1 * KiB, 100 * KiB, 4 * MiB, 100 * MiB};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        void *p = alloc_on(f.mr, n, s);
        void *q = move_block(f.mr, p, n, s, 0xAA, t);
        write_and_expect(q, n, 0xBB, t, s);
        ck_assert_crmm_ok(crmm_resource_deallocate(f.mr, q, n, (crmm_cuda_stream_t)t));
    }
    drop_streams_and_arena(&f, s, t);
}

/* The arena is one large block, so T can only get the memory S freed: S writes 0xAA behind
 * slow work and frees at once (no wait: the pages are tagged with S); T's allocation must wait
 * for the device before it hands them out. Also across two shards. */
static const struct { const char *params; size_t n; } whole_arenas[] = {
    {"arena_size=4MiB", 4 * MiB},
    {"arena_size=128MiB shards=2", 128 * MiB},
};

CRMM_LOOP_TEST_IN("arena_gpu", a_large_block_moves_to_another_stream_after_its_work, 2)
{
    fixture f = make_arena_over("cuda", whole_arenas[_i].params);
    cudaStream_t s = new_stream(), t = new_stream();
    size_t n = whole_arenas[_i].n;
    void *p = alloc_on(f.mr, n, s);
    void *q = move_block(f.mr, p, n, s, 0xAA, t);
    ck_assert_ptr_eq(q, p);
    ck_assert_uint_eq(stats(f.mr).stream_syncs, 1);
    write_and_expect(q, n, 0xBB, t, s);
    p = move_block(f.mr, q, n, t, 0xCC, s); /* back on s after t's slow work */
    ck_assert_ptr_eq(p, q);
    ck_assert_uint_eq(stats(f.mr).stream_syncs, 2);
    write_and_expect(p, n, 0xDD, s, NULL);
    ck_assert_crmm_ok(crmm_resource_deallocate(f.mr, p, n, (crmm_cuda_stream_t)s));
    drop_streams_and_arena(&f, s, t);
}

/* S frees a large block with its work still pending and is destroyed: T gets the block (the
 * arena never passes S's dead handle to CUDA) after that work. T exists before S is destroyed,
 * so it cannot have S's handle. */
CRMM_TEST_IN("arena_gpu", a_destroyed_stream_s_block_goes_to_another_stream)
{
    fixture f = make_arena_over("cuda", "arena_size=4MiB");
    cudaStream_t t = new_stream(), s = new_stream();
    const size_t n = 4 * MiB;
    hold_stream(s, SLOW_MS);
    void *p = alloc_on(f.mr, n, s);
    ck_assert_cuda(cudaMemsetAsync(p, 0xAA, n, s));
    free_on(f.mr, p, n, s);
    ck_assert_cuda(cudaStreamDestroy(s)); /* its work still runs to the end */
    void *q = alloc_on(f.mr, n, t);
    ck_assert_ptr_eq(q, p);
    write_and_expect(q, n, 0xBB, t, NULL);
    ck_assert_crmm_ok(crmm_resource_deallocate(f.mr, q, n, (crmm_cuda_stream_t)t));
    drop_streams_and_arena(&f, NULL, t);
}

/* On w->stream: slow work, then 0xAA into a block of each of w->sizes (up to a 0), each freed at
 * once (the last one's address kept in w->p). A thread running it exits with the stream busy. */
typedef struct writer {
    crmm_resource *mr;
    cudaStream_t stream;
    size_t sizes[4];
    void *p;
    int failed;
} writer;

static void *write_free_and_exit(void *arg)
{
    writer *w = arg;
    if (cudaLaunchHostFunc(w->stream, sleep_ms, (void *)(uintptr_t)SLOW_MS) != cudaSuccess)
        w->failed = 1;
    for (int k = 0; k < 4 && w->sizes[k]; k++)
        if (crmm_resource_allocate(w->mr, w->sizes[k], (crmm_cuda_stream_t)w->stream, &w->p) != CRMM_OK ||
            cudaMemsetAsync(w->p, 0xAA, w->sizes[k], w->stream) != cudaSuccess ||
            crmm_resource_deallocate(w->mr, w->p, w->sizes[k], (crmm_cuda_stream_t)w->stream) != CRMM_OK)
            w->failed = 1;
    return NULL;
}

/* cudaStreamPerThread is another stream on every thread: memory one thread freed on it is
 * handed to another thread's only after the first one's work. */
CRMM_TEST_IN("arena_gpu", per_thread_default_streams_are_ordered_between_threads)
{
    fixture f = make_arena_over("cuda", "arena_size=4MiB");
    writer j = {f.mr, cudaStreamPerThread, {4 * MiB}, NULL, 0}; /* the whole arena */
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, write_free_and_exit, &j), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(j.failed, 0);
    void *q = alloc_on(f.mr, 4 * MiB, cudaStreamPerThread);
    ck_assert_ptr_eq(q, j.p);
    write_and_expect(q, 4 * MiB, 0xBB, cudaStreamPerThread, NULL);
    ck_assert_crmm_ok(crmm_resource_deallocate(f.mr, q, 4 * MiB, CRMM_CUDA_STREAM_PER_THREAD));
    drop_streams_and_arena(&f, NULL, NULL);
}

/* Blocks allocated on S and freed on T (T used them last) go back to S's arena only after T's
 * work: S, out of blocks (256 of 4 KiB fill its superblock), reuses them and writes after T's
 * slow write. */
CRMM_TEST_IN("arena_gpu", free_on_another_stream_waits_for_it)
{
    fixture f = make_arena_over("cuda", "arena_size=256MiB");
    cudaStream_t s = new_stream(), t = new_stream();
    enum { N = 256 };
    void *p[N];
    for (int i = 0; i < N; i++)
        ck_assert_crmm_ok(crmm_resource_allocate(f.mr, 4 * KiB, (crmm_cuda_stream_t)s, &p[i]));
    ck_assert_cuda(cudaStreamSynchronize(s));
    hold_stream(t, SLOW_MS);
    for (int i = 0; i < N; i++) {
        ck_assert_cuda(cudaMemsetAsync(p[i], 0xAA, 4 * KiB, t));
        ck_assert_crmm_ok(crmm_resource_deallocate(f.mr, p[i], 4 * KiB, (crmm_cuda_stream_t)t));
    }
    for (int i = 0; i < N; i++) {
        ck_assert_crmm_ok(crmm_resource_allocate(f.mr, 4 * KiB, (crmm_cuda_stream_t)s, &p[i]));
        ck_assert_cuda(cudaMemsetAsync(p[i], 0xBB, 4 * KiB, s));
    }
    ck_assert_uint_eq(stats(f.mr).superblocks, 1); /* the same blocks again */
    for (int i = 0; i < N; i++) {
        expect_device_bytes(p[i], 4 * KiB, 0xBB);
        ck_assert_crmm_ok(crmm_resource_deallocate(f.mr, p[i], 4 * KiB, (crmm_cuda_stream_t)s));
    }
    drop_streams_and_arena(&f, s, t);
}

/* The thread's superblocks go back when it exits, and only after its stream's work: a request
 * for the whole arena on another stream then sees none of the old writes. */
CRMM_TEST_IN("arena_gpu", thread_exit_returns_superblocks_after_their_work)
{
    fixture f = make_arena_over("cuda", "arena_size=4MiB");
    writer w = {f.mr, new_stream(), {256, 512, 768, 1024}, NULL, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, write_free_and_exit, &w), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(w.failed, 0);
    ck_assert_uint_eq(stats(f.mr).global_free_bytes, 4 * MiB);
    cudaStream_t t = new_stream();
    void *all = alloc_on(f.mr, 4 * MiB, t);
    write_and_expect(all, 4 * MiB, 0xBB, t, w.stream);
    ck_assert_crmm_ok(crmm_resource_deallocate(f.mr, all, 4 * MiB, (crmm_cuda_stream_t)t));
    drop_streams_and_arena(&f, t, w.stream);
}

/* Superblocks held empty by this thread's arena for stream S, with S still writing into them:
 * a request for the whole arena on T defragments, which waits for the device first. */
CRMM_TEST_IN("arena_gpu", defragment_waits_for_pending_work)
{
    fixture f = make_arena_over("cuda", "arena_size=4MiB");
    cudaStream_t s = new_stream(), t = new_stream();
    writer w = {f.mr, s, {256, 512, 768, 1024}, NULL, 0};
    write_free_and_exit(&w); /* here, not in a thread: the superblocks stay with this thread */
    ck_assert_int_eq(w.failed, 0);
    ck_assert_uint_eq(stats(f.mr).superblocks_held, 4);
    void *all = alloc_on(f.mr, 4 * MiB, t);
    ck_assert_uint_eq(stats(f.mr).defragmentations, 1);
    write_and_expect(all, 4 * MiB, 0xBB, t, s);
    ck_assert_crmm_ok(crmm_resource_deallocate(f.mr, all, 4 * MiB, (crmm_cuda_stream_t)t));
    drop_streams_and_arena(&f, s, t);
}

typedef struct ptds_job {
    crmm_resource *mr;
    int index;
    int failed;
    char why[200];
} ptds_job;

/* Allocate, write and check blocks on the per-thread default stream. */
static void *per_thread_stream_work(void *arg)
{
    ptds_job *j = arg;
    enum { N = 50 };
    void *p[N];
    unsigned char h[2048];
    for (int round = 0; round < 20 && !j->failed; round++) {
        for (int i = 0; i < N; i++) {
            size_t n = 256 + (size_t)((i * 37 + j->index) % 1792);
            if (crmm_resource_allocate(j->mr, n, CRMM_CUDA_STREAM_PER_THREAD, &p[i]) != CRMM_OK ||
                cudaMemsetAsync(p[i], (unsigned char)(i + j->index), n, cudaStreamPerThread) != cudaSuccess) {
                j->failed = 1;
                snprintf(j->why, sizeof j->why, "allocate/memset: %s", crmm_last_error());
                return NULL;
            }
        }
        for (int i = 0; i < N; i++) {
            size_t n = 256 + (size_t)((i * 37 + j->index) % 1792);
            if (cudaMemcpyAsync(h, p[i], n, cudaMemcpyDeviceToHost, cudaStreamPerThread) != cudaSuccess ||
                cudaStreamSynchronize(cudaStreamPerThread) != cudaSuccess) {
                j->failed = 1;
                snprintf(j->why, sizeof j->why, "copy failed");
                return NULL;
            }
            for (size_t b = 0; b < n; b++)
                if (h[b] != (unsigned char)(i + j->index)) {
                    j->failed = 1;
                    snprintf(j->why, sizeof j->why, "round %d block %d byte %zu: %u", round, i, b, h[b]);
                    break;
                }
            if (crmm_resource_deallocate(j->mr, p[i], n, CRMM_CUDA_STREAM_PER_THREAD) != CRMM_OK) {
                j->failed = 1;
                snprintf(j->why, sizeof j->why, "free: %s", crmm_last_error());
            }
        }
    }
    return NULL;
}

CRMM_TEST_IN("arena_gpu", threads_on_their_default_streams)
{
    fixture f = make_arena_over("cuda", "arena_size=256MiB");
    enum { T = 4 };
    pthread_t th[T];
    ptds_job j[T];
    for (int i = 0; i < T; i++) {
        j[i] = (ptds_job){.mr = f.mr, .index = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, per_thread_stream_work, &j[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_msg(!j[i].failed, "thread %d: %s", i, j[i].why);
    }
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_ALLOCATIONS), 0);
    ck_assert_uint_eq(stats(f.mr).thread_arenas, 0);
    drop_arena(&f);
}

CRMM_TEST_IN("arena_gpu", out_of_memory_over_device_memory)
{
    char *dir = crmm_test_tmpdir();
    ck_assert_ptr_nonnull(dir);
    char params[4200], path[4200];
    int dev = crmm_test_cuda_device();
    snprintf(params, sizeof params, "arena_size=64MiB dump_log_on_failure=1 dump_file=%s/arena.dev%%d.log", dir);
    snprintf(path, sizeof path, "%s/arena.dev%d.log", dir, dev);
    fixture f = make_arena_over("cuda", params);
    void *p = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(f.mr, 128 * MiB, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(crmm_last_error(), "failed to allocate 128.0 MiB (arena size 64.0 MiB") != NULL, "%s",
                  crmm_last_error());
    ck_assert_int_eq(access(path, R_OK), 0);
    ck_assert_uint_eq(crmm_test_query(f.mr, CRMM_QUERY_BYTES_RESERVED), 64 * MiB);
    drop_arena(&f);
    free(dir); /* removed with the dump when the test's process exits */
}

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    Suite *s = suite_create("arena_gpu");
    crmm_conformance_add(s, gpu_chains, (int)(sizeof gpu_chains / sizeof gpu_chains[0]));
    crmm_test_tcase(s, "arena_gpu", CRMM_TEST_GPU_TIMEOUT);
    return crmm_test_run(s);
}
