/* check_bench_gpu.c — `crmm bench` on a GPU: the raw cudaMalloc / cudaMallocAsync /
 * cudaMallocFromPoolAsync references through the runner (per-thread non-blocking streams), their
 * out-of-memory path, the default pool's release threshold being restored, the private pool
 * leaving the default one alone, and the command over a cuda + host config. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "test_support.h"
#include "../bench/bench_cli.h"
#include "../bench/bench_reference.h"
#include "../bench/bench_runner.h"
#include "../bench/bench_workload.h"

CRMM_TEST(references_run_the_workload)
{
    bench_workload w = {.mode = BENCH_MODE_STEPS, .steps = 2000, .max_live = 100, .max_size = 1u << 20};
    bench_sequence q[2];
    for (unsigned t = 0; t < 2; t++)
        ck_assert_crmm_ok(bench_sequence_make(&w, t, &q[t]));
    for (int k = 0; k < BENCH_REFERENCE_COUNT; k++) {
        crmm_resource *mr;
        ck_assert_crmm_ok(bench_reference_create((bench_reference_kind)k, 0, &mr));
        ck_assert_str_eq(crmm_resource_kind(mr), bench_reference_name((bench_reference_kind)k));
        ck_assert(crmm_resource_is_device_accessible(mr));
        bench_run_options opt = {.repeats = 2, .device = 0};
        bench_result r;
        ck_assert_crmm_ok(bench_run(mr, q, 2, &opt, &r));
        ck_assert_msg(r.outcome == BENCH_OUTCOME_OK, "%s: %s", bench_reference_name((bench_reference_kind)k), r.error);
        ck_assert_uint_eq(r.runs, 2);
        ck_assert(r.ns_per_op_min > 0 && r.ns_per_op_min <= r.ns_per_op_median && r.ns_per_op_median <= r.ns_per_op_max);
        if (k != BENCH_REFERENCE_CUDA_MALLOC) {
            ck_assert(r.has_peak_reserved);
            ck_assert_uint_gt(r.peak_reserved_bytes, 0);
        } else {
            ck_assert(!r.has_peak_reserved);
        }
        crmm_resource_release(mr);
    }
    for (unsigned t = 0; t < 2; t++)
        bench_sequence_free(&q[t]);
}

CRMM_TEST(async_reference_raises_then_restores_the_threshold)
{
    cudaMemPool_t pool;
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_int_eq(cudaDeviceGetMemPool(&pool, 0), cudaSuccess);
    uint64_t before = 12345, now = 0;
    ck_assert_int_eq(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &before), cudaSuccess);
    crmm_resource *mr;
    ck_assert_crmm_ok(bench_reference_create(BENCH_REFERENCE_CUDA_MALLOC_ASYNC, 0, &mr));
    ck_assert_int_eq(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &now), cudaSuccess);
    ck_assert_uint_eq(now, UINT64_MAX);
    crmm_resource_release(mr);
    ck_assert_int_eq(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &now), cudaSuccess);
    ck_assert_uint_eq(now, 12345);
    uint64_t zero = 0;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero);
}

CRMM_TEST(from_pool_reference_uses_a_pool_of_its_own)
{
    cudaMemPool_t pool;
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_int_eq(cudaDeviceGetMemPool(&pool, 0), cudaSuccess);
    uint64_t before = 12345, now = 0, used_before = 0, used = 0;
    ck_assert_int_eq(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &before), cudaSuccess);
    ck_assert_int_eq(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used_before), cudaSuccess);
    crmm_resource *mr;
    ck_assert_crmm_ok(bench_reference_create(BENCH_REFERENCE_CUDA_MALLOC_FROM_POOL_ASYNC, 0, &mr));
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 1u << 20, NULL, &p));
    ck_assert_ptr_nonnull(p);
    /* the default pool neither served it nor had its threshold changed */
    ck_assert_int_eq(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
    ck_assert_uint_eq(used, used_before);
    ck_assert_int_eq(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &now), cudaSuccess);
    ck_assert_uint_eq(now, 12345);
    /* its own pool holds at least the 1 MiB */
    uint64_t reserved = 0;
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_BYTES_RESERVED, &reserved));
    ck_assert_uint_ge(reserved, 1u << 20);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1u << 20, NULL));
    crmm_resource_release(mr);
    uint64_t zero = 0;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero);
}

CRMM_TEST(references_report_out_of_memory)
{
    /* 1 MiB, then 1 PiB (fails), then the frees the bench would have done */
    bench_op ops[] = {{1u << 20, 0, 0}, {1ull << 50, 1, 0}, {1ull << 50, 1, 1}, {1u << 20, 0, 1}};
    bench_sequence q = {.ops = ops, .count = 4, .steps = 4, .allocs = 2, .frees = 2, .slots = 2,
                        .peak_live_bytes = (1ull << 50) + (1u << 20), .peak_live_count = 2};
    for (int k = 0; k < BENCH_REFERENCE_COUNT; k++) {
        crmm_resource *mr;
        ck_assert_crmm_ok(bench_reference_create((bench_reference_kind)k, 0, &mr));
        bench_run_options opt = {.repeats = 1, .device = 0};
        bench_result r;
        ck_assert_crmm_ok(bench_run(mr, &q, 1, &opt, &r));
        ck_assert_msg(r.outcome != BENCH_OUTCOME_OK, "a 1 PiB allocation succeeded");
        if (k == BENCH_REFERENCE_CUDA_MALLOC)
            ck_assert_msg(r.outcome == BENCH_OUTCOME_OOM, "outcome %d: %s", (int)r.outcome, r.error);
        ck_assert_msg(strstr(r.error, bench_reference_name((bench_reference_kind)k)) != NULL, "error: %s", r.error);
        crmm_resource_release(mr);
        cudaGetLastError();
    }
}

CRMM_TEST(cli_over_gpu_and_host)
{
    const char *path = crmm_test_write_file("gpu.ini", "[crmm]\ndefault = gpu\n[resource.gpu]\nplugin = cuda\n"
                                                       "[resource.h]\nplugin = host\n");
    char *argv[] = {"bench", "--config", (char *)path, "--set", "B,D", "--steps", "1000", "--repeats", "1",
                    "--json", NULL};
    crmm_test_output r = crmm_test_run_main(bench_cli_main, argv);
    const char *o = r.out;
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_null(strstr(o, "\"no_gpu_reason\": \""));
    ck_assert_ptr_nonnull(strstr(o, "\"device\": \"device "));
    ck_assert_int_eq(crmm_test_count(o, "\"status\": \"ok\""), 10); /* 2 sets x gpu, h and the 3 references */
    ck_assert_int_eq(crmm_test_count(o, "\"resource\": \"gpu\", \"plugin\": \"cuda\""), 2);
    /* the async reference answers its reserved peak */
    const char *row = strstr(o, "\"resource\": \"cudaMallocAsync\"");
    ck_assert_ptr_nonnull(row);
    const char *reserved = strstr(row, "\"peak_reserved_bytes\": ");
    ck_assert_ptr_nonnull(reserved);
    ck_assert_msg(strncmp(reserved + 23, "null", 4) != 0, "%s", row);
    crmm_test_output_free(&r);
}

int main(void)
{
    int rc = crmm_test_gpu_gate(1);
    if (rc)
        return rc;
    return crmm_test_main("bench_gpu", CRMM_TEST_GPU_TIMEOUT);
}
