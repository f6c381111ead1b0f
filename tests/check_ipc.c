/* check_ipc.c — sharing crmm memory with another process (crmm/ipc.h) on the CPU: the expandable
 * pool over the scripted driver of fake_vmm.h (an exported page is a plain file naming the
 * allocation), handles passed between two processes over a UNIX socket, and every refusal. */
#include "build_config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <crmm/ipc.h>
#include "fakes/fake_vmm.h"
#include "test_support.h"
#include "peer_process.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE (64 * KiB)
#define DEVICE_MEMORY (64 * MiB)

static void setup(void) { fake_vmm_reset(PAGE, DEVICE_MEMORY); }

static crmm_resource *ipc_pool(const char *params)
{
    crmm_resource *p = NULL;
    ck_assert_crmm_ok(fake_vmm_expandable_pool(params, &p));
    return p;
}

static bool fd_is_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

/* The ids of the allocations a handle's descriptors name, in order (malloc'd). */
static int *named_ids(const crmm_ipc_handle *h, size_t *n)
{
    const int *fds = NULL;
    *n = crmm_ipc_handle_fds(h, &fds);
    int *ids = calloc(*n ? *n : 1, sizeof *ids);
    for (size_t i = 0; i < *n; i++)
        ids[i] = fake_vmm_exported_handle(fds[i], NULL);
    return ids;
}

CRMM_TEST_IN("ipc", export_gives_one_descriptor_per_page_that_backs_the_range)
{
    crmm_resource *p = ipc_pool("ipc=true");
    void *a = crmm_test_allocate(p, 100 * KiB);       /* pages 0-1 */
    void *b = crmm_test_allocate(p, 3 * PAGE);        /* from inside page 1 through page 4 */
    uintptr_t first = (uintptr_t)b & ~(uintptr_t)(PAGE - 1);
    uintptr_t last = ((uintptr_t)b + 3 * PAGE - 1) & ~(uintptr_t)(PAGE - 1);
    size_t pages = (last - first) / PAGE + 1;
    ck_assert_uint_eq(pages, 4);
    crmm_ipc_handle *h = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(p, b, 3 * PAGE, &h));
    size_t n;
    int *ids = named_ids(h, &n);
    ck_assert_uint_eq(n, pages);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(ids[i], fake_vmm_handle_at(first + i * PAGE)); /* exactly those pages, in order */
    free(ids);
    ck_assert_int_eq(fake_vmm.exports, (int)pages);
    /* a part of a block exports only the pages under that part */
    crmm_ipc_handle *part = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(p, (char *)a + 70 * KiB, 10 * KiB, &part));
    ids = named_ids(part, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ids[0], fake_vmm_handle_at((uintptr_t)a + 70 * KiB));
    free(ids);
    crmm_ipc_handle_free(part);

    /* the importer maps the pages in a row into a range of its own; the pointer keeps its offset */
    int maps = fake_vmm.maps, set_access = fake_vmm.set_access;
    crmm_ipc_mapping *m = NULL;
    ck_assert_crmm_ok(crmm_ipc_import(h, &m));
    ck_assert_uint_eq(crmm_ipc_mapping_size(m), 3 * PAGE);
    uintptr_t at = (uintptr_t)crmm_ipc_mapping_ptr(m);
    ck_assert_uint_eq(at % PAGE, (uintptr_t)b % PAGE);
    ck_assert(at < fake_vmm.range || at >= fake_vmm.range + fake_vmm.range_size);
    ck_assert_int_eq(fake_vmm.imports, (int)pages);
    ck_assert_int_eq(fake_vmm.maps - maps, (int)pages);
    ck_assert_int_eq(fake_vmm.set_access - set_access, 1);
    memset((void *)at, 0x5A, 3 * PAGE); /* readable and writable: an unmapped page would crash */
    ck_assert_crmm_ok(crmm_ipc_close(m));
    ck_assert_int_eq(fake_vmm.imported_live, 0); /* every imported handle let go */
    crmm_ipc_handle_free(h);
    ck_assert_crmm_ok(crmm_resource_deallocate(p, a, 100 * KiB, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(p, b, 3 * PAGE, NULL));
    crmm_resource_release(p);
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 0);
    ck_assert_uint_eq(fake_vmm.physical, 0);
}

/* Exporter frees (and gives its pages back) while the importer maps them, then the importer
 * closes (_i = 1); and the other way round (_i = 0): nothing is left either way. */
CRMM_LOOP_TEST_IN("ipc", freeing_in_either_order_leaks_nothing, 2)
{
    crmm_resource *p = ipc_pool("ipc=true");
    void *b = crmm_test_allocate(p, 2 * PAGE);
    crmm_ipc_handle *h = NULL;
    crmm_ipc_mapping *m = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(p, b, 2 * PAGE, &h));
    ck_assert_crmm_ok(crmm_ipc_import(h, &m));
    crmm_ipc_handle_free(h);
    if (_i) {
        ck_assert_crmm_ok(crmm_resource_deallocate(p, b, 2 * PAGE, NULL));
        ck_assert_crmm_ok(crmm_resource_trim(p)); /* the pool unmaps and releases its pages */
        memset(crmm_ipc_mapping_ptr(m), 1, 2 * PAGE); /* the import still maps its own */
        ck_assert_crmm_ok(crmm_ipc_close(m));
    } else {
        ck_assert_crmm_ok(crmm_ipc_close(m));
        ck_assert_crmm_ok(crmm_resource_deallocate(p, b, 2 * PAGE, NULL));
    }
    crmm_resource_release(p);
    ck_assert_int_eq(fake_vmm.imported_live, 0);
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 0);
    ck_assert_uint_eq(fake_vmm.physical, 0);
    ck_assert_int_eq(fake_vmm.frees, fake_vmm.reserves); /* the pool's range and the import's */
}

/* The device current at the last device synchronization, and how many there were. */
static int synced_device = -1, device_syncs_seen;

static void note_device_sync(int what, cudaStream_t s)
{
    (void)s;
    if (what == FAKE_ORDER_DEVICE_SYNC) {
        synced_device = fake_vmm.device;
        device_syncs_seen++;
    }
}

/* An ipc pool (*p) with a live block of two pages (*b) and b's handle, for the close tests. */
static crmm_ipc_handle *export_two_pages(crmm_resource **p, void **b)
{
    *p = ipc_pool("ipc=true");
    *b = crmm_test_allocate(*p, 2 * PAGE);
    crmm_ipc_handle *h = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(*p, *b, 2 * PAGE, &h));
    return h;
}

/* Free export_two_pages' block and pool. */
static void free_two_pages(crmm_resource *p, void *b)
{
    ck_assert_crmm_ok(crmm_resource_deallocate(p, b, 2 * PAGE, NULL));
    crmm_resource_release(p);
}

/* An import made on device 1, closed while device 0 is current: work on device 1 may still use
 * the mapping, so close waits for device 1 before it unmaps, and device 0 is current again
 * afterwards. */
CRMM_TEST_IN("ipc", close_waits_for_the_device_the_import_was_made_on)
{
    crmm_resource *p;
    void *b;
    crmm_ipc_handle *h = export_two_pages(&p, &b);
    fake_vmm.devices = 2;
    fake_vmm.device = 1;
    crmm_ipc_mapping *m = NULL;
    ck_assert_crmm_ok(crmm_ipc_import(h, &m));
    crmm_ipc_handle_free(h);
    fake_vmm.device = 0;
    synced_device = -1, device_syncs_seen = 0;
    fake_vmm_order_hook = note_device_sync;
    int unmaps = fake_vmm.unmaps;
    ck_assert_crmm_ok(crmm_ipc_close(m));
    fake_vmm_order_hook = NULL;
    ck_assert_int_eq(device_syncs_seen, 1);
    ck_assert_int_eq(synced_device, 1);
    ck_assert_int_eq(fake_vmm.device, 0);
    ck_assert_int_gt(fake_vmm.unmaps, unmaps);
    ck_assert_int_eq(fake_vmm.imported_live, 0);
    free_two_pages(p, b);
    ck_assert_uint_eq(fake_vmm_mapped_bytes(), 0);
}

/* At close the unmap of the first page fails: that page may still be mapped, so the import's
 * address range is not freed (the driver could place another reservation over the live mapping)
 * and the page keeps its memory; the other pages are unmapped, and the error names cuMemUnmap. The
 * mapping is then closed for good: its pointer is NULL, and a second close is refused without a
 * driver call (not a second free). */
CRMM_TEST_IN("ipc", a_failed_unmap_at_close_keeps_the_address_range)
{
    crmm_resource *p;
    void *b;
    crmm_ipc_handle *h = export_two_pages(&p, &b);
    crmm_ipc_mapping *m = NULL;
    ck_assert_crmm_ok(crmm_ipc_import(h, &m));
    crmm_ipc_handle_free(h);
    int pages = fake_vmm.imports;
    ck_assert_int_ge(pages, 2);
    int unmaps = fake_vmm.unmaps, address_frees = fake_vmm.address_free_calls;
    fake_vmm.unmap_fails_in = 1;
    ck_assert_crmm(crmm_ipc_close(m), CRMM_ERROR_CUDA);
    ck_assert_error_contains("cuMemUnmap");
    ck_assert_int_eq(fake_vmm.address_free_calls, address_frees);
    ck_assert_int_eq(fake_vmm.unmaps - unmaps, pages - 1);
    ck_assert_int_eq(fake_vmm.imported_live, 1);
    ck_assert_ptr_null(crmm_ipc_mapping_ptr(m));
    ck_assert_uint_eq(crmm_ipc_mapping_size(m), 0);
    int syncs = fake_vmm.device_syncs;
    ck_assert_crmm(crmm_ipc_close(m), CRMM_ERROR_STATE);
    ck_assert_int_eq(fake_vmm.unmaps - unmaps, pages - 1);
    ck_assert_int_eq(fake_vmm.address_free_calls, address_frees);
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    free_two_pages(p, b);
}

/* An import that fails once its pages are mapped (cuMemSetAccess refused) unmaps them again; when
 * one of those unmaps fails, the range is kept as at close, and the error is the access call's,
 * naming the unmap too. */
CRMM_TEST_IN("ipc", a_failed_unmap_while_an_import_backs_out_keeps_the_address_range)
{
    crmm_resource *p;
    void *b;
    crmm_ipc_handle *h = export_two_pages(&p, &b);
    int address_frees = fake_vmm.address_free_calls;
    fake_vmm.set_access_fails_in = 1;
    fake_vmm.unmap_fails_in = 1;
    crmm_ipc_mapping *m = (crmm_ipc_mapping *)0x1;
    ck_assert_crmm(crmm_ipc_import(h, &m), CRMM_ERROR_CUDA);
    ck_assert_ptr_null(m);
    ck_assert_error_contains("cuMemSetAccess");
    ck_assert_error_contains("cuMemUnmap");
    ck_assert_int_eq(fake_vmm.address_free_calls, address_frees);
    ck_assert_int_eq(fake_vmm.imported_live, 1);
    crmm_ipc_handle_free(h);
    free_two_pages(p, b);
}

/* The driver refuses to release an imported page's handle once it is mapped: the mapping would
 * then never let go of that memory, so the import fails naming cuMemRelease, and unmaps and frees
 * what it had mapped. */
CRMM_TEST_IN("ipc", an_import_whose_handle_cannot_be_released_fails)
{
    crmm_resource *p;
    void *b;
    crmm_ipc_handle *h = export_two_pages(&p, &b);
    int maps = fake_vmm.maps, unmaps = fake_vmm.unmaps, frees = fake_vmm.frees;
    fake_vmm.release_fails_in = 1;
    crmm_ipc_mapping *m = (crmm_ipc_mapping *)0x1;
    ck_assert_crmm(crmm_ipc_import(h, &m), CRMM_ERROR_CUDA);
    ck_assert_ptr_null(m);
    ck_assert_error_contains("cuMemRelease");
    ck_assert_int_eq(fake_vmm.maps - maps, 1); /* nothing more is imported after it */
    ck_assert_int_eq(fake_vmm.unmaps - unmaps, 1);
    ck_assert_int_eq(fake_vmm.frees - frees, 1);
    crmm_ipc_handle_free(h);
    free_two_pages(p, b);
}

/* A child process receives the handle over a UNIX socket and checks that each descriptor names
 * the same allocation as the parent's; more pages than one message can carry. */
CRMM_TEST_IN("ipc", a_handle_travels_to_another_process_with_its_descriptors)
{
    crmm_resource *p = ipc_pool("ipc=true");
    size_t bytes = 300 * PAGE;
    void *b = crmm_test_allocate(p, bytes);
    crmm_ipc_handle *h = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(p, b, bytes, &h));
    size_t n;
    int *ids = named_ids(h, &n);
    ck_assert_uint_ge(n, 300);
    int fd;
    pid_t child = crmm_test_fork_peer(CRMM_TEST_SOCKETS, &fd);
    if (child == 0) {
        crmm_ipc_handle *got = NULL;
        int bad = 0;
        if (crmm_ipc_recv(fd, &got) != CRMM_OK) {
            fprintf(stderr, "child: %s\n", crmm_last_error());
            _exit(10);
        }
        const void *mine = NULL, *theirs = NULL;
        size_t len = crmm_ipc_handle_bytes(got, &theirs);
        if (len != crmm_ipc_handle_bytes(h, &mine) || memcmp(mine, theirs, len) != 0)
            bad |= 1;
        size_t k;
        int *got_ids = named_ids(got, &k);
        if (k != n)
            bad |= 2;
        for (size_t i = 0; i < k && i < n; i++)
            if (got_ids[i] != ids[i])
                bad |= 4;
        _exit(bad);
    }
    ck_assert_crmm_ok(crmm_ipc_send(fd, h));
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    close(fd);
    free(ids);
    crmm_ipc_handle_free(h);
    ck_assert_crmm_ok(crmm_resource_deallocate(p, b, bytes, NULL));
    crmm_resource_release(p);
}

/* A block of `p` cannot be exported: CRMM_ERROR_UNSUPPORTED, the message holding `why` (NULL: not
 * checked), and no handle; then p is released. */
static void export_refused(crmm_resource *p, const char *why)
{
    crmm_ipc_handle *h = (crmm_ipc_handle *)0x1;
    void *x = crmm_test_allocate(p, 4096);
    ck_assert_crmm(crmm_ipc_export(p, x, 4096, &h), CRMM_ERROR_UNSUPPORTED);
    ck_assert_ptr_null(h);
    if (why)
        ck_assert_error_contains(why);
    ck_assert_crmm_ok(crmm_resource_deallocate(p, x, 4096, NULL));
    crmm_resource_release(p);
}

/* An expandable pool made with `params` on a device that cannot export what they ask for: the
 * pool says so at creation (its log holds `said`), export refuses. */
static void export_refused_by_the_device(const char *params, const char *said)
{
    crmm_test_log_capture_begin();
    crmm_resource *p = ipc_pool(params);
    char *log = crmm_test_log_capture_end();
    ck_assert_ptr_nonnull(strstr(log, said));
    free(log);
    export_refused(p, NULL);
}

CRMM_TEST_IN("ipc", what_cannot_be_exported_is_refused)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    export_refused(crmm_test_create("pool", "initial_size=1MiB", host), "host memory");
    crmm_resource_release(host);
    export_refused(ipc_pool(""), "without ipc = true"); /* an expandable pool made without ipc */

    /* a pool that grows by chunks (over device memory, but the device lacks the virtual memory API) */
    fake_vmm.vmm_unsupported = 1;
    crmm_resource *p = ipc_pool("initial_size=1MiB ipc=true");
    fake_vmm.vmm_unsupported = 0;
    void *x = crmm_test_allocate(p, 4096);
    crmm_ipc_handle *h = NULL;
    ck_assert_crmm(crmm_ipc_export(crmm_resource_upstream(p), x, 4096, &h), CRMM_ERROR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "no async or pool layer")); /* its upstream alone */
    ck_assert_crmm_ok(crmm_resource_deallocate(p, x, 4096, NULL));
    export_refused(p, "not expandable");

    fake_vmm.export_unsupported = 1; /* a device that cannot export descriptors */
    export_refused_by_the_device("ipc=true", "cannot be exported");
    fake_vmm.export_unsupported = 0;
    export_refused_by_the_device("ipc=true ipc_handle_type=fabric", "does not export fabric handles");
    ck_assert_int_eq(fake_vmm.exports, 0);

    /* bad parameter values */
    ck_assert_crmm(fake_vmm_expandable_pool("ipc=maybe", &p), CRMM_ERROR_CONFIG);
    ck_assert_crmm(fake_vmm_expandable_pool("ipc=true ipc_handle_type=carrier_pigeon", &p), CRMM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "ipc_handle_type"));
}

CRMM_TEST_IN("ipc", bad_export_arguments_are_refused_and_leave_nothing_open)
{
    crmm_resource *p = ipc_pool("ipc=true");
    void *x = crmm_test_allocate(p, PAGE);
    crmm_ipc_handle *h = (crmm_ipc_handle *)0x1;
    ck_assert_crmm(crmm_ipc_export(NULL, x, PAGE, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(h);
    ck_assert_crmm(crmm_ipc_export(p, NULL, PAGE, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_ipc_export(p, x, 0, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_ipc_export(p, x, PAGE, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    /* outside the pool's range, past its end, and over pages it has not mapped */
    int outside;
    ck_assert_crmm(crmm_ipc_export(p, &outside, sizeof outside, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_ipc_export(p, x, fake_vmm.range_size + PAGE, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_ipc_export(p, x, 8 * PAGE, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "not memory the pool holds"));
    ck_assert_int_eq(fake_vmm.exports, 0);
    ck_assert_crmm(crmm_resource_control(p, CRMM_IPC_OP_EXPORT, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm_ok(crmm_resource_deallocate(p, x, PAGE, NULL));
    crmm_resource_release(p);
}

/* A page the pool lent (its old address still mapped, its physical memory mapped again where the
 * pool grew) is not memory the pool holds there: exporting it would hand out the page that now
 * backs another block. */
CRMM_TEST_IN("ipc", lent_pages_are_not_exported)
{
    crmm_resource *p = ipc_pool("ipc=true page_moves=wait");
    fake_vmm.events_busy = 1; /* the lent pages stay lent */
    unsigned char *a = crmm_test_allocate(p, 3 * PAGE), *b = crmm_test_allocate(p, PAGE),
                  *c = crmm_test_allocate(p, 2 * PAGE);
    ck_assert_ptr_eq(c, a + 4 * PAGE);
    ck_assert_crmm_ok(crmm_resource_deallocate(p, a, 3 * PAGE, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(p, c, 2 * PAGE, NULL));
    unsigned char *z = crmm_test_allocate(p, 4 * PAGE); /* a's top two pages move under z */
    ck_assert_ptr_eq(z, c);
    ck_assert_int_eq(fake_vmm_handle_at((uintptr_t)a + 2 * PAGE), fake_vmm_handle_at((uintptr_t)z + 2 * PAGE));
    crmm_ipc_handle *h = (crmm_ipc_handle *)0x1;
    ck_assert_crmm(crmm_ipc_export(p, a + 2 * PAGE, PAGE, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(h);
    ck_assert_crmm(crmm_ipc_export(p, a, 3 * PAGE, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(fake_vmm.exports, 0);
    /* z itself exports its own pages */
    ck_assert_crmm_ok(crmm_ipc_export(p, z, 4 * PAGE, &h));
    crmm_ipc_handle_free(h);
    fake_vmm.events_busy = 0;
    ck_assert_crmm_ok(crmm_resource_deallocate(p, z, 4 * PAGE, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(p, b, PAGE, NULL));
    crmm_resource_release(p);
}

/* A descriptor of a plain file, to hand to functions that take ownership of descriptors. */
static int plain_fd(void)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    int fd = dup(fileno(f));
    fclose(f);
    return fd;
}

CRMM_TEST_IN("ipc", bad_handles_are_refused_and_their_descriptors_closed)
{
    crmm_ipc_handle *h = (crmm_ipc_handle *)0x1;
    unsigned char junk[200];
    memset(junk, 0x33, sizeof junk);
    int fd = plain_fd();
    ck_assert_crmm(crmm_ipc_handle_from(junk, sizeof junk, &fd, 1, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(h);
    ck_assert(!fd_is_open(fd));
    ck_assert_crmm(crmm_ipc_handle_from(junk, 3, NULL, 0, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_ipc_handle_from(NULL, 0, NULL, 0, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_ipc_handle_from(junk, sizeof junk, NULL, 2, &h), CRMM_ERROR_INVALID_ARGUMENT);

    /* a real handle's bytes with one descriptor too few or too many */
    crmm_resource *p = ipc_pool("ipc=true");
    void *x = crmm_test_allocate(p, 2 * PAGE);
    crmm_ipc_handle *good = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(p, x, 2 * PAGE, &good));
    const void *bytes = NULL;
    size_t len = crmm_ipc_handle_bytes(good, &bytes);
    int three[3] = {plain_fd(), plain_fd(), plain_fd()};
    ck_assert_crmm(crmm_ipc_handle_from(bytes, len, three, 3, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "descriptors"));
    for (int i = 0; i < 3; i++)
        ck_assert(!fd_is_open(three[i]));
    /* the same bytes with the right count are a handle (of descriptors that name nothing) */
    int two[2] = {plain_fd(), plain_fd()};
    ck_assert_crmm_ok(crmm_ipc_handle_from(bytes, len, two, 2, &h));
    crmm_ipc_mapping *m = (crmm_ipc_mapping *)0x1;
    ck_assert_crmm(crmm_ipc_import(h, &m), CRMM_ERROR_CUDA); /* the driver refuses them */
    ck_assert_ptr_null(m);
    ck_assert_int_eq(fake_vmm.imported_live, 0);
    crmm_ipc_handle_free(h);
    ck_assert(!fd_is_open(two[0]) && !fd_is_open(two[1]));
    ck_assert_crmm(crmm_ipc_import(NULL, &m), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_ipc_import(good, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm_ok(crmm_ipc_close(NULL));
    ck_assert_ptr_null(crmm_ipc_mapping_ptr(NULL));
    ck_assert_uint_eq(crmm_ipc_mapping_size(NULL), 0);
    ck_assert_uint_eq(crmm_ipc_handle_bytes(NULL, &bytes), 0);
    crmm_ipc_handle_free(NULL);
    crmm_ipc_handle_free(good);
    ck_assert_crmm_ok(crmm_resource_deallocate(p, x, 2 * PAGE, NULL));
    crmm_resource_release(p);
}

CRMM_TEST_IN("ipc", bad_socket_traffic_is_refused)
{
    crmm_ipc_handle *h = (crmm_ipc_handle *)0x1;
    ck_assert_crmm(crmm_ipc_recv(-1, &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_ipc_recv(0, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_ipc_send(0, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    int sv[2];
    /* a frame that announces nonsense */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    uint64_t frame[2] = {UINT64_MAX, 5};
    ck_assert_int_eq(write(sv[0], frame, sizeof frame), (ssize_t)sizeof frame);
    ck_assert_crmm(crmm_ipc_recv(sv[1], &h), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(h);
    close(sv[0]), close(sv[1]);
    /* a peer that goes away in the middle of a handle */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    uint64_t half[2] = {112, 1};
    ck_assert_int_eq(write(sv[0], half, sizeof half), (ssize_t)sizeof half);
    ck_assert_int_eq(write(sv[0], "crmmIPC1", 8), 8);
    close(sv[0]);
    ck_assert_crmm(crmm_ipc_recv(sv[1], &h), CRMM_ERROR_IO);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "closed"));
    close(sv[1]);
    /* sending to a socket whose peer is gone */
    crmm_resource *p = ipc_pool("ipc=true");
    void *x = crmm_test_allocate(p, PAGE);
    crmm_ipc_handle *good = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(p, x, PAGE, &good));
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[1]);
    ck_assert_crmm(crmm_ipc_send(sv[0], good), CRMM_ERROR_IO);
    ck_assert_crmm(crmm_ipc_send(-1, good), CRMM_ERROR_INVALID_ARGUMENT);
    close(sv[0]);
    crmm_ipc_handle_free(good);
    ck_assert_crmm_ok(crmm_resource_deallocate(p, x, PAGE, NULL));
    crmm_resource_release(p);
}

/* A receiving socket with SO_PASSCRED gets the sender's credentials with every message, beside
 * the descriptors: a full batch of descriptors still fits. */
CRMM_TEST_IN("ipc", a_full_batch_of_descriptors_arrives_beside_credentials)
{
    crmm_resource *p = ipc_pool("ipc=true");
    size_t bytes = 300 * PAGE;
    void *b = crmm_test_allocate(p, bytes);
    crmm_ipc_handle *h = NULL, *got = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(p, b, bytes, &h));
    int sv[2], one = 1;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ck_assert_int_eq(setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof one), 0);
    ck_assert_crmm_ok(crmm_ipc_send(sv[0], h));
    ck_assert_crmm_ok(crmm_ipc_recv(sv[1], &got));
    ck_assert_uint_eq(crmm_ipc_handle_fds(got, NULL), crmm_ipc_handle_fds(h, NULL));
    crmm_ipc_handle_free(got);
    crmm_ipc_handle_free(h);
    close(sv[0]), close(sv[1]);
    ck_assert_crmm_ok(crmm_resource_deallocate(p, b, bytes, NULL));
    crmm_resource_release(p);
}

/* Open descriptors of this process. */
static int open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 4096; fd++)
        n += fd_is_open(fd);
    return n;
}

/* A receiving socket with SO_PASSPIDFD gets a pidfd of the sender with every message: recv
 * closes them (nobody else sees them). */
CRMM_TEST_IN("ipc", recv_closes_the_pidfds_the_kernel_adds)
{
    crmm_resource *p = ipc_pool("ipc=true");
    void *b = crmm_test_allocate(p, 2 * PAGE);
    crmm_ipc_handle *h = NULL, *got = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(p, b, 2 * PAGE, &h));
    int sv[2], one = 1;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    if (setsockopt(sv[1], SOL_SOCKET, 76 /* SO_PASSPIDFD */, &one, sizeof one) == 0) { /* Linux 6.5 on */
        int before = open_fds();
        ck_assert_crmm_ok(crmm_ipc_send(sv[0], h));
        ck_assert_crmm_ok(crmm_ipc_recv(sv[1], &got));
        ck_assert_int_eq(open_fds(), before + (int)crmm_ipc_handle_fds(got, NULL));
        crmm_ipc_handle_free(got);
    }
    crmm_ipc_handle_free(h);
    close(sv[0]), close(sv[1]);
    free_two_pages(p, b);
}

/* Adaptors are looked through: a statistics layer over the pool exports the pool's memory. */
CRMM_TEST_IN("ipc", adaptors_are_looked_through)
{
    crmm_resource *p = ipc_pool("ipc=true");
    crmm_resource *stats = crmm_test_create("statistics", NULL, p);
    crmm_resource_release(p);
    void *x = crmm_test_allocate(stats, PAGE);
    crmm_ipc_handle *h = NULL;
    ck_assert_crmm_ok(crmm_ipc_export(stats, x, PAGE, &h));
    ck_assert_uint_eq(crmm_ipc_handle_fds(h, NULL), 1 + ((uintptr_t)x % PAGE != 0));
    crmm_ipc_handle_free(h);
    ck_assert_crmm_ok(crmm_resource_deallocate(stats, x, PAGE, NULL));
    crmm_resource_release(stats);
}

int main(void)
{
    Suite *s = suite_create("ipc");
    TCase *tc = crmm_test_tcase(s, "ipc", 0);
    tcase_add_checked_fixture(tc, setup, NULL);
    return crmm_test_run(s);
}
