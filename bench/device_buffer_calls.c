/* device_buffer_calls.c — what one crmm_device_buffer create + destroy costs in C on the current
 * device's resource, next to the pieces it is made of (the CUDA runtime's device queries,
 * the current-resource lookup, the device guard, the resource's allocate + deallocate).
 * It is what every DeviceBuffer, CuPy and Numba allocation pays below Python. Needs a GPU.
 *
 *     make bench/device_buffer_calls && CRMM_CONFIG=conf/crmm.ini bench/device_buffer_calls
 *
 * Prints the best of 5 runs of N calls (default 2 000 000; first argument) per line, in ns. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include <crmm/crmm.h>
#include <crmm/config.h>
#include <crmm/cuda_support.h>
#include <crmm/device_buffer.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* Best of 5 runs of n iterations of `body`, in ns per iteration. */
#define BEST_OF_5(label, n, body)                                                                    \
    do {                                                                                             \
        double best = 1e30;                                                                          \
        for (int run = 0; run < 5; run++) {                                                          \
            double start = now_ns();                                                                 \
            for (long i = 0; i < (n); i++) {                                                         \
                body;                                                                                \
            }                                                                                        \
            double per = (now_ns() - start) / (double)(n);                                           \
            best = per < best ? per : best;                                                          \
        }                                                                                            \
        printf("%9.1f ns  %s\n", best, label);                                                       \
    } while (0)

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    if (n <= 0) {
        fprintf(stderr, "usage: %s [ITERATIONS > 0]\n", argv[0]);
        return 2;
    }
    int device = 0, count = 0;
    if (crmm_init(NULL) != CRMM_OK || cudaGetDevice(&device) != cudaSuccess) {
        fprintf(stderr, "device_buffer_calls: %s\n", crmm_last_error());
        return 1;
    }
    crmm_resource *mr = crmm_get_current_device_resource();
    if (!mr) {
        fprintf(stderr, "device_buffer_calls: %s\n", crmm_last_error());
        return 1;
    }
    printf("# device %d, current resource '%s' (plugin %s); best of 5 x %ld\n", device, crmm_resource_name(mr),
           crmm_resource_kind(mr), n);
    crmm_device_guard guard;
    crmm_device_buffer *buf;
    void *p;
    BEST_OF_5("cudaGetDevice", n, cudaGetDevice(&device));
    BEST_OF_5("cudaGetDeviceCount", n, cudaGetDeviceCount(&count));
    BEST_OF_5("crmm_get_current_device_resource_ref + release", n,
              crmm_resource_release(crmm_get_current_device_resource_ref()));
    BEST_OF_5("crmm_cuda_device_enter + restore (the device current already)", n,
              (crmm_cuda_device_enter(device, &guard), crmm_cuda_device_restore(&guard)));
    BEST_OF_5("crmm_resource_allocate + deallocate of 4096 bytes, stream NULL", n,
              (crmm_resource_allocate(mr, 4096, NULL, &p), crmm_resource_deallocate(mr, p, 4096, NULL)));
    BEST_OF_5("crmm_device_buffer_create + destroy of 4096 bytes, the current device's resource", n,
              (crmm_device_buffer_create(4096, NULL, NULL, &buf), crmm_device_buffer_destroy(buf)));
    BEST_OF_5("crmm_device_buffer_create + destroy of 4096 bytes, the resource given", n,
              (crmm_device_buffer_create(4096, NULL, mr, &buf), crmm_device_buffer_destroy(buf)));
    crmm_graph_capture_enable(true);
    BEST_OF_5("the same on the current device's resource, graph capture enabled", n,
              (crmm_device_buffer_create(4096, NULL, NULL, &buf), crmm_device_buffer_destroy(buf)));
    crmm_finalize();
    return 0;
}
