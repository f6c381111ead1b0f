/* bench_copy.c — `crmm bench --copy`: bandwidth of crmm's host<->device copies against raw
 * cudaMemcpy in the same run.
 *
 * For each size (1 MiB .. 1 GiB) and each kind of host memory (pageable from malloc, pinned from
 * cudaMallocHost) it times crmm_device_buffer_to_device (host → a new buffer, on the default
 * stream, so finished at return; the buffer's allocation is part of what is timed, its free is
 * not) and crmm_device_buffer_copy_to_host (buffer → host), each beside the same transfer done
 * with cudaMemcpy into/out of memory allocated once. A sample is a batch of copies moving at
 * least 256 MiB (the sum of the per-call times); the table shows the median of --repeats samples
 * after one warm-up, crmm and raw samples taken in turn so that drift hits both alike. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include <crmm/crmm.h>
#include "bench_copy.h"
#include "long_option.h"

#define COPY_BENCH_MIN_BYTES_PER_SAMPLE ((size_t)256 << 20)
#define COPY_BENCH_GOAL_FROM ((size_t)64 << 20)
#define COPY_BENCH_GOAL 0.95
#define COPY_BENCH_MAX_REPEATS 99

static const size_t copy_sizes[] = {
    (size_t)1 << 20, (size_t)4 << 20, (size_t)16 << 20, (size_t)64 << 20, (size_t)256 << 20, (size_t)1 << 30,
};
#define N_COPY_SIZES (sizeof copy_sizes / sizeof copy_sizes[0])

typedef struct copy_bench {
    crmm_resource *mr;  /* what to_device allocates from */
    void *raw_dev;      /* cudaMalloc'd, max size: raw cudaMemcpy's device side */
    void *host;         /* the host memory of the current kind */
    int repeats;
} copy_bench;

typedef enum copy_direction { TO_DEVICE, TO_HOST } copy_direction;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Seconds for `count` crmm copies of `size` bytes (the calls alone), or < 0 on error. */
static double time_crmm(copy_bench *b, copy_direction dir, size_t size, int count, crmm_device_buffer *src)
{
    double total = 0;
    for (int i = 0; i < count; i++) {
        crmm_device_buffer *buf = NULL;
        double t0 = now_s();
        crmm_status st = dir == TO_DEVICE ? crmm_device_buffer_to_device(b->host, size, NULL, b->mr, &buf)
                                          : crmm_device_buffer_copy_to_host(src, b->host, size, NULL);
        total += now_s() - t0;
        crmm_device_buffer_destroy(buf);
        if (st != CRMM_OK) {
            fprintf(stderr, "crmm bench --copy: %s\n", crmm_last_error());
            return -1;
        }
    }
    return total;
}

/* Seconds for `count` raw cudaMemcpy copies of `size` bytes, or < 0 on error. */
static double time_raw(copy_bench *b, copy_direction dir, size_t size, int count)
{
    double total = 0;
    for (int i = 0; i < count; i++) {
        double t0 = now_s();
        cudaError_t e = dir == TO_DEVICE ? cudaMemcpy(b->raw_dev, b->host, size, cudaMemcpyHostToDevice)
                                         : cudaMemcpy(b->host, b->raw_dev, size, cudaMemcpyDeviceToHost);
        total += now_s() - t0;
        if (e != cudaSuccess) {
            fprintf(stderr, "crmm bench --copy: cudaMemcpy: %s\n", cudaGetErrorString(e));
            return -1;
        }
    }
    return total;
}

/* One table row: median GB/s of crmm and of raw. */
static int bench_row(copy_bench *b, copy_direction dir, const char *host_kind, size_t size)
{
    int count = size >= COPY_BENCH_MIN_BYTES_PER_SAMPLE ? 1 : (int)(COPY_BENCH_MIN_BYTES_PER_SAMPLE / size);
    crmm_device_buffer *src = NULL;
    if (dir == TO_HOST) {
        if (crmm_device_buffer_create(size, NULL, b->mr, &src) != CRMM_OK) {
            fprintf(stderr, "crmm bench --copy: %s\n", crmm_last_error());
            return -1;
        }
        cudaMemset(crmm_device_buffer_ptr(src), 1, size);
        cudaDeviceSynchronize();
    }
    double crmm_gbs[COPY_BENCH_MAX_REPEATS], raw_gbs[COPY_BENCH_MAX_REPEATS];
    int rc = 0;
    for (int r = -1; r < b->repeats && rc == 0; r++) { /* r == -1: warm-up */
        double tc = time_crmm(b, dir, size, count, src);
        double tr = time_raw(b, dir, size, count);
        if (tc < 0 || tr < 0)
            rc = -1;
        else if (r >= 0) {
            crmm_gbs[r] = (double)size * count / tc / 1e9;
            raw_gbs[r] = (double)size * count / tr / 1e9;
        }
    }
    crmm_device_buffer_destroy(src);
    if (rc)
        return rc;
    double c = median(crmm_gbs, b->repeats), w = median(raw_gbs, b->repeats), ratio = c / w;
    char sz[32];
    const char *goal = size < COPY_BENCH_GOAL_FROM ? "" : ratio >= COPY_BENCH_GOAL ? "ok" : "BELOW";
    printf("%-13s %-9s %9s %11.2f %10.2f %6.3f  %s\n", dir == TO_DEVICE ? "to_device" : "copy_to_host", host_kind,
           crmm_format_size(size, sz, sizeof sz), c, w, ratio, goal);
    fflush(stdout);
    return 0;
}

void bench_copy_usage(FILE *f)
{
    fprintf(f,
            "usage: crmm bench --copy [--config FILE] [--resource NAME] [--repeats N] [--max-size SIZE]\n\n"
            "Bandwidth of crmm_device_buffer_to_device and crmm_device_buffer_copy_to_host from pageable\n"
            "and pinned host memory, beside raw cudaMemcpy in the same run; sizes 1 MiB .. 1 GiB.\n"
            "  --config FILE    load this config (else $CRMM_CONFIG, the installed one, the built-in)\n"
            "  --resource NAME  allocate buffers from this resource of the config (default: the\n"
            "                   current device's resource); to_device's time includes its allocation\n"
            "  --repeats N      samples per row, median shown (default 5, at most %d)\n"
            "  --max-size SIZE  largest size to run (default 1GiB)\n"
            "Goal: ratio (crmm / raw) >= %.2f from 64 MiB up. Without a GPU it skips and exits 0.\n",
            COPY_BENCH_MAX_REPEATS, COPY_BENCH_GOAL);
}

/* Parse the options; returns 0, or an exit status (2 for bad usage, 0 after --help) + 100. */
static int parse_args(int argc, char **argv, const char **config, const char **resource, int *repeats,
                      size_t *max_size)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        /* "--name=value" as "--name" "value" (crmm bench passes its arguments as they came) */
        const char *eq = long_option_equals(a);
        char name[64];
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
            a = name;
            val = eq + 1;
        }
        if (strcmp(a, "--copy") == 0)
            continue;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            bench_copy_usage(stdout);
            return 100;
        }
        bool known = !strcmp(a, "--config") || !strcmp(a, "--resource") || !strcmp(a, "--repeats") ||
                     !strcmp(a, "--max-size");
        if (!known || !val) {
            fprintf(stderr, "crmm bench --copy: %s '%s' (see crmm bench --copy --help)\n",
                    known ? "missing value after" : "unknown option", a);
            return 102;
        }
        if (!eq)
            i++;
        if (strcmp(a, "--config") == 0) {
            *config = val;
        } else if (strcmp(a, "--resource") == 0) {
            *resource = val;
        } else if (strcmp(a, "--repeats") == 0) {
            char *end;
            long n = strtol(val, &end, 10);
            if (val[0] < '0' || val[0] > '9' || *end || n < 1 || n > COPY_BENCH_MAX_REPEATS) {
                fprintf(stderr, "crmm bench --copy: --repeats must be 1..%d, not '%s'\n", COPY_BENCH_MAX_REPEATS, val);
                return 102;
            }
            *repeats = (int)n;
        } else {
            uint64_t v = 0;
            if (crmm_parse_size(val, 0, &v, NULL) != CRMM_OK) {
                fprintf(stderr, "crmm bench --copy: --max-size: %s\n", crmm_last_error());
                return 102;
            }
            if (v < copy_sizes[0]) {
                fprintf(stderr, "crmm bench --copy: --max-size '%s' must be at least 1 MiB\n", val);
                return 102;
            }
            *max_size = (size_t)v;
        }
    }
    return 0;
}

static int run_host_kind(copy_bench *b, const char *kind, size_t max_size, uint64_t dev_free)
{
    for (size_t i = 0; i < N_COPY_SIZES && copy_sizes[i] <= max_size; i++) {
        size_t size = copy_sizes[i];
        if ((uint64_t)size * 2 + ((uint64_t)256 << 20) > dev_free) {
            char sz[32];
            printf("%-13s %-9s %9s  skipped: not enough free device memory\n", "both", kind,
                   crmm_format_size(size, sz, sizeof sz));
            continue;
        }
        if (bench_row(b, TO_DEVICE, kind, size) || bench_row(b, TO_HOST, kind, size))
            return 1;
    }
    return 0;
}

/* Print the header and every row over pageable then pinned memory; 0 on success. */
static int run_copy_bench(copy_bench *b, int dev, size_t max_size)
{
    uint64_t dev_free = 0;
    if (crmm_cuda_device_memory(dev, &dev_free, NULL) != CRMM_OK)
        return 1;
    size_t top = 0;
    for (size_t i = 0; i < N_COPY_SIZES && copy_sizes[i] <= max_size; i++)
        top = copy_sizes[i];
    cudaError_t e = cudaMalloc(&b->raw_dev, top);
    if (e != cudaSuccess) {
        b->raw_dev = NULL;
        crmm_cuda_status(e, "cudaMalloc");
        return 1;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
        snprintf(prop.name, sizeof prop.name, "?");
    printf("crmm bench --copy: device %d (%s), resource '%s' (%s), median of %d samples after a warm-up\n", dev,
           prop.name, crmm_resource_name(b->mr), crmm_resource_kind(b->mr), b->repeats);
    printf("%-13s %-9s %9s %11s %10s %6s  %s\n", "copy", "host", "size", "GB/s crmm", "GB/s raw", "ratio",
           "goal>=0.95");

    void *pageable = malloc(top);
    if (!pageable) {
        crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "no host memory for the pageable buffer");
        return 1;
    }
    memset(pageable, 7, top); /* fault every page in before timing */
    b->host = pageable;
    int failed = run_host_kind(b, "pageable", max_size, dev_free);
    free(pageable);
    if (failed)
        return 1;

    void *pinned = NULL;
    if ((e = cudaMallocHost(&pinned, top)) != cudaSuccess) {
        printf("%-13s %-9s  skipped: cudaMallocHost: %s\n", "both", "pinned", cudaGetErrorString(e));
        return 0;
    }
    memset(pinned, 7, top);
    b->host = pinned;
    failed = run_host_kind(b, "pinned", max_size, dev_free);
    cudaFreeHost(pinned);
    return failed;
}

int bench_copy_main(int argc, char **argv)
{
    const char *config = NULL, *resource = NULL;
    int repeats = 5;
    size_t max_size = copy_sizes[N_COPY_SIZES - 1];
    int rc = parse_args(argc, argv, &config, &resource, &repeats, &max_size);
    if (rc)
        return rc - 100;
    int ndev = 0, dev = 0;
    if (crmm_cuda_device_count(&ndev) != CRMM_OK || crmm_cuda_current_device(&dev) != CRMM_OK) {
        printf("crmm bench --copy: skipped: no usable CUDA device (%s)\n", crmm_last_error());
        return 0;
    }
    crmm_clear_error();
    copy_bench b = {.repeats = repeats};
    if (crmm_init(config) != CRMM_OK)
        rc = 1;
    else if (resource)
        rc = crmm_config_create_resource((crmm_config *)crmm_current_config(), resource, dev, &b.mr) != CRMM_OK;
    else
        rc = !(b.mr = crmm_resource_retain(crmm_get_current_device_resource()));
    if (rc == 0)
        rc = run_copy_bench(&b, dev, max_size);
    if (rc)
        fprintf(stderr, "crmm bench --copy: %s\n", crmm_last_error());
    if (b.raw_dev)
        cudaFree(b.raw_dev);
    crmm_resource_release(b.mr);
    crmm_finalize();
    return rc;
}
