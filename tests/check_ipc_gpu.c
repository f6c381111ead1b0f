/* check_ipc_gpu.c — two processes on one GPU share crmm memory (crmm/ipc.h), for `async`
 * (enable_ipc = true) and the expandable pool (ipc = true): data written by one is read by the
 * other, freeing in either order works, and a killed peer leaves the other working.
 *
 * Each test forks its peer before either process makes a CUDA call (a CUDA context does not
 * survive fork), then both use CUDA; they talk over a UNIX socket pair: the handle, then one
 * byte per step. Skips without a GPU. */
#include "build_config.h"
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <crmm/ipc.h>
#include "test_support.h"
#include "peer_process.h"

#define BYTES (((size_t)8 << 20) + 4096) /* not a whole number of pages */
#define PAD 1000                       /* allocated first, so the shared block starts inside a page */

/* The exporting resource: async with enable_ipc, or an expandable pool with ipc over cuda. */
static crmm_status make_resource(const char *kind, crmm_resource **out)
{
    if (strcmp(kind, "async") == 0)
        return crmm_resource_create("async", "enable_ipc=true", NULL, out);
    crmm_resource *cuda = NULL;
    crmm_status st = crmm_resource_create("cuda", NULL, NULL, &cuda);
    if (st == CRMM_OK)
        st = crmm_resource_create("pool", "expandable=true ipc=true", cuda, out);
    crmm_resource_release(cuda);
    return st;
}

static void say(int sock, char c)
{
    if (write(sock, &c, 1) != 1)
        perror("ipc test: write");
}

static int hear(int sock)
{
    char c;
    return read(sock, &c, 1) == 1 ? c : -1;
}

/* Whether all n bytes at device pointer p are `value`. */
static bool device_bytes_are(const void *p, size_t n, unsigned char value)
{
    unsigned char *h = malloc(n);
    bool ok = h && cudaMemcpy(h, p, n, cudaMemcpyDeviceToHost) == cudaSuccess;
    for (size_t i = 0; ok && i < n; i++)
        ok = h[i] == value;
    free(h);
    return ok;
}

#define CHILD_CHECK(cond, code)                                                                          \
    do {                                                                                                 \
        if (!(cond)) {                                                                                   \
            fprintf(stderr, "peer: %s failed (%s)\n", #cond, crmm_last_error());                         \
            _exit(code);                                                                                 \
        }                                                                                                \
    } while (0)

/* The importer: map what arrives, check the exporter's bytes, write its own, then close when told
 * ('C'), or, told that the exporter has freed ('X'), check that its mapping still holds its bytes
 * before closing. */
static void importer(int sock)
{
    crmm_ipc_handle *h = NULL;
    crmm_ipc_mapping *m = NULL;
    CHILD_CHECK(crmm_ipc_recv(sock, &h) == CRMM_OK, 10);
    CHILD_CHECK(crmm_ipc_import(h, &m) == CRMM_OK, 11);
    crmm_ipc_handle_free(h);
    void *p = crmm_ipc_mapping_ptr(m);
    CHILD_CHECK(crmm_ipc_mapping_size(m) == BYTES, 12);
    CHILD_CHECK(device_bytes_are(p, BYTES, 0x5A), 13);
    CHILD_CHECK(cudaMemset(p, 0xC3, BYTES) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, 14);
    say(sock, 'W');
    int order = hear(sock);
    if (order == 'X')
        CHILD_CHECK(device_bytes_are(p, BYTES, 0xC3), 15);
    CHILD_CHECK(crmm_ipc_close(m) == CRMM_OK, 16);
    say(sock, 'D');
    _exit(0);
}

/* How a share ends: the importer closes before the exporter frees; the exporter frees (and trims)
 * before the importer closes; the importer is killed while it maps the memory (the exporter then
 * frees, trims and allocates again). */
enum ending { IMPORTER_CLOSES_FIRST, EXPORTER_FREES_FIRST, IMPORTER_KILLED };

/* The shares run: data crosses both ways for both kinds; the driver's rule for pool allocations
 * is that importers free first, and only the expandable pool lets the exporter free first (its
 * physical pages stay while the import maps them); both survive a killed importer. */
static const struct { const char *kind; enum ending how; } shares[] = {
    {"async", IMPORTER_CLOSES_FIRST}, {"pool", IMPORTER_CLOSES_FIRST}, {"pool", EXPORTER_FREES_FIRST},
    {"async", IMPORTER_KILLED},       {"pool", IMPORTER_KILLED},
};

/* Run the importer as a forked peer, export a block of the share's kind to it, and end as its
 * `how` says. */
CRMM_LOOP_TEST(a_share_ends_as_planned, (int)(sizeof shares / sizeof shares[0]))
{
    const char *kind = shares[_i].kind;
    enum ending how = shares[_i].how;
    int fd;
    pid_t child = crmm_test_fork_peer(CRMM_TEST_SOCKETS, &fd);
    if (child == 0) {
        importer(fd);
    }
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(make_resource(kind, &mr));
    void *pad = crmm_test_allocate(mr, PAD), *p = crmm_test_allocate(mr, BYTES);
    ck_assert_int_eq(cudaMemset(p, 0x5A, BYTES), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    crmm_ipc_handle *h = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(mr, p, BYTES, &h));
    ck_assert_crmm_ok(crmm_ipc_send(fd, h));
    crmm_ipc_handle_free(h);
    ck_assert_int_eq(hear(fd), 'W');
    int status = 0;
    if (how == IMPORTER_KILLED) {
        ck_assert_int_eq(kill(child, SIGKILL), 0); /* it was still there, waiting */
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert(WIFSIGNALED(status));
    }
    ck_assert(device_bytes_are(p, BYTES, 0xC3)); /* the importer's bytes */
    if (how == IMPORTER_CLOSES_FIRST) {
        say(fd, 'C');
        ck_assert_int_eq(hear(fd), 'D');
    }
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, BYTES, NULL));
    if (how != IMPORTER_CLOSES_FIRST)
        ck_assert_crmm_ok(crmm_resource_trim(mr));
    if (how == EXPORTER_FREES_FIRST) {
        say(fd, 'X');
        ck_assert_int_eq(hear(fd), 'D');
    }
    if (how == IMPORTER_KILLED) {
        p = crmm_test_allocate(mr, BYTES);
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, BYTES, NULL));
    } else {
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the importer ended with status %#x", status);
    }
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, pad, PAD, NULL));
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(mr);
    close(fd);
}

/* The exporter is killed while the importer maps its pages: the pages stay with the importer,
 * which reads them and closes cleanly. */
CRMM_TEST(pool_import_outlives_a_killed_exporter)
{
    int fd;
    pid_t child = crmm_test_fork_peer(CRMM_TEST_SOCKETS, &fd);
    if (child == 0) {
        crmm_resource *mr = NULL;
        CHILD_CHECK(make_resource("pool", &mr) == CRMM_OK, 20);
        void *p = NULL;
        CHILD_CHECK(crmm_resource_allocate(mr, BYTES, NULL, &p) == CRMM_OK, 21);
        CHILD_CHECK(cudaMemset(p, 0x5A, BYTES) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, 22);
        crmm_ipc_handle *h = NULL;
        CHILD_CHECK(crmm_ipc_export(mr, p, BYTES, &h) == CRMM_OK, 23);
        CHILD_CHECK(crmm_ipc_send(fd, h) == CRMM_OK, 24);
        hear(fd); /* until killed */
        _exit(25);
    }
    crmm_ipc_handle *h = NULL;
    crmm_ipc_mapping *m = NULL;
    ck_assert_crmm_ok(crmm_ipc_recv(fd, &h));
    ck_assert_crmm_ok(crmm_ipc_import(h, &m));
    crmm_ipc_handle_free(h);
    ck_assert_int_eq(kill(child, SIGKILL), 0); /* it was still there, waiting */
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFSIGNALED(status));
    ck_assert(device_bytes_are(crmm_ipc_mapping_ptr(m), BYTES, 0x5A));
    ck_assert_crmm_ok(crmm_ipc_close(m));
    close(fd);
}

/* Importing a handle in the process that exported it is refused by the driver, clearly. */
CRMM_TEST(what_cannot_be_exported_on_a_gpu_is_refused)
{
    crmm_resource *plain = NULL, *cuda = NULL, *chunked = NULL;
    ck_assert_crmm_ok(crmm_resource_create("async", NULL, NULL, &plain));
    void *p = crmm_test_allocate(plain, 4096);
    crmm_ipc_handle *h = NULL;
    ck_assert_crmm(crmm_ipc_export(plain, p, 4096, &h), CRMM_ERROR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "without enable_ipc"));
    ck_assert_crmm_ok(crmm_resource_deallocate(plain, p, 4096, NULL));
    crmm_resource_release(plain);
    ck_assert_crmm_ok(crmm_resource_create("cuda", NULL, NULL, &cuda));
    ck_assert_crmm_ok(crmm_resource_create("pool", "initial_size=16MiB ipc=true", cuda, &chunked));
    p = crmm_test_allocate(chunked, 4096);
    ck_assert_crmm(crmm_ipc_export(chunked, p, 4096, &h), CRMM_ERROR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "not expandable"));
    ck_assert_crmm(crmm_ipc_export(cuda, p, 4096, &h), CRMM_ERROR_UNSUPPORTED);
    ck_assert_crmm_ok(crmm_resource_deallocate(chunked, p, 4096, NULL));
    crmm_test_release(chunked, cuda);
    ck_assert_crmm(crmm_resource_create("async", "enable_ipc=true export_handle_type=fabric", NULL, &plain), CRMM_ERROR_CONFIG);
}

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    return crmm_test_main("ipc_gpu", CRMM_TEST_GPU_TIMEOUT);
}
