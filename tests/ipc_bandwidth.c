/* ipc_bandwidth.c — a tool built with the tests and run by hand: how fast one process copies
 * memory another process shares with it through crmm/ipc.h, against the same copy inside one
 * process.
 *
 *   tests/ipc_bandwidth [async|pool] [BYTES]      (default: pool, 1 GiB)
 *
 * The exporter (a forked child, forked before any CUDA call) allocates BYTES from `async`
 * (enable_ipc = true) or an expandable pool (ipc = true) over cuda, fills them and sends the
 * handle. The importer maps them and times cudaMemcpy device-to-device from the imported memory
 * into a buffer of its own (best of several runs, CUDA events), then the same copy between two
 * buffers of its own, and prints both rates and their ratio. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <crmm/crmm.h>
#include <crmm/ipc.h>

#define RUNS 10

static int fail(const char *what)
{
    fprintf(stderr, "ipc_bandwidth: %s: %s\n", what, crmm_last_error());
    return 1;
}

static int exporter(int sock, const char *kind, size_t bytes)
{
    crmm_resource *mr = NULL, *cuda = NULL;
    crmm_status st;
    if (strcmp(kind, "async") == 0)
        st = crmm_resource_create("async", "enable_ipc=true", NULL, &mr);
    else if ((st = crmm_resource_create("cuda", NULL, NULL, &cuda)) == CRMM_OK)
        st = crmm_resource_create("pool", "expandable=true ipc=true", cuda, &mr);
    crmm_resource_release(cuda);
    if (st != CRMM_OK)
        return fail("create");
    void *p = NULL;
    crmm_ipc_handle *h = NULL;
    if (crmm_resource_allocate(mr, bytes, NULL, &p) != CRMM_OK)
        return fail("allocate");
    cudaMemset(p, 0x11, bytes);
    cudaDeviceSynchronize();
    if (crmm_ipc_export(mr, p, bytes, &h) != CRMM_OK || crmm_ipc_send(sock, h) != CRMM_OK)
        return fail("export");
    crmm_ipc_handle_free(h);
    char c;
    if (read(sock, &c, 1) != 1) /* the importer is done */
        fprintf(stderr, "ipc_bandwidth: the importer went away\n");
    crmm_resource_deallocate(mr, p, bytes, NULL);
    crmm_resource_release(mr);
    return 0;
}

/* The best rate of copying `bytes` from src to dst, in GB/s. */
static double best_rate(void *dst, const void *src, size_t bytes)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    float best = 0;
    for (int i = 0; i < RUNS; i++) {
        cudaEventRecord(a, NULL);
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, NULL);
        cudaEventRecord(b, NULL);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        if (i > 0 && (best == 0 || ms < best)) /* the first run warms up */
            best = ms;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best > 0 ? bytes / (best * 1e6) : 0;
}

int main(int argc, char **argv)
{
    const char *kind = argc > 1 ? argv[1] : "pool";
    size_t bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : (size_t)1 << 30;
    if ((strcmp(kind, "pool") != 0 && strcmp(kind, "async") != 0) || !bytes) {
        fprintf(stderr, "usage: ipc_bandwidth [async|pool] [BYTES]\n");
        return 2;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    pid_t child = fork();
    if (child == 0) {
        close(sv[0]);
        _exit(exporter(sv[1], kind, bytes));
    }
    close(sv[1]);
    crmm_ipc_handle *h = NULL;
    crmm_ipc_mapping *m = NULL;
    if (crmm_ipc_recv(sv[0], &h) != CRMM_OK || crmm_ipc_import(h, &m) != CRMM_OK)
        return fail("import");
    crmm_ipc_handle_free(h);
    void *dst = NULL, *src = NULL;
    if (cudaMalloc(&dst, bytes) != cudaSuccess || cudaMalloc(&src, bytes) != cudaSuccess) {
        fprintf(stderr, "ipc_bandwidth: cudaMalloc of 2 x %zu bytes failed\n", bytes);
        return 1;
    }
    cudaMemset(src, 0x22, bytes);
    double shared = best_rate(dst, crmm_ipc_mapping_ptr(m), bytes);
    double local = best_rate(dst, src, bytes);
    unsigned char first = 0;
    cudaMemcpy(dst, crmm_ipc_mapping_ptr(m), 1, cudaMemcpyDeviceToDevice);
    cudaMemcpy(&first, dst, 1, cudaMemcpyDeviceToHost);
    printf("%s: %zu bytes: from the other process %.1f GB/s, inside one process %.1f GB/s, ratio %.3f%s\n", kind, bytes,
           shared, local, local > 0 ? shared / local : 0, first == 0x11 ? "" : " (DATA MISMATCH)");
    cudaFree(dst);
    cudaFree(src);
    crmm_ipc_close(m);
    if (write(sv[0], "D", 1) != 1)
        perror("ipc_bandwidth: write");
    int status = 0;
    waitpid(child, &status, 0);
    return first == 0x11 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
