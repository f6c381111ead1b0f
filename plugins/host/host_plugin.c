/* host_plugin.c — the `host` plugin: 256-byte aligned host memory from aligned_alloc.
 *
 * Host accessible only, needs no GPU: the upstream the CPU test suite and `crmm bench` run
 * pool, arena and the adaptors over on a machine without one. A request larger than the
 * machine's physical memory is out of memory at once, without asking the C library (which, with
 * overcommit, might promise it; and which aborts under AddressSanitizer instead of failing). */
#include "config.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "../aligned/aligned_ptrmap.h"
#include "../common/direct_resource.h"

/* Every live block and its size, for all host resources of the process: a double free, a
 * pointer host never gave and a wrong size are refused instead of reaching free(). */
static aligned_ptrmap *host_live;
static pthread_once_t host_live_once = PTHREAD_ONCE_INIT;

static void host_live_init(void) { host_live = aligned_ptrmap_new(); }

/* At unload the table goes; a block freed after that (by another exit handler) is freed unchecked. */
static bool host_live_gone;
static void host_live_fini(void) __attribute__((destructor));
static void host_live_fini(void)
{
    aligned_ptrmap *m = host_live;
    host_live_gone = true;
    host_live = NULL;
    aligned_ptrmap_free(m);
}

/* Physical memory in bytes; SIZE_MAX when the system does not say. */
static size_t host_physical_memory(void)
{
    static size_t cached;
    size_t m = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (!m) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
        m = pages > 0 && page > 0 && (unsigned long)pages <= SIZE_MAX / (unsigned long)page
                ? (size_t)pages * (size_t)page : SIZE_MAX;
        __atomic_store_n(&cached, m, __ATOMIC_RELAXED);
    }
    return m;
}

static crmm_status host_alloc(size_t bytes, void **ptr)
{
    size_t physical = host_physical_memory();
    if (bytes > physical) {
        char sz[32];
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "more than the machine's memory (%s)",
                              crmm_format_size(physical, sz, sizeof sz));
    }
    if (bytes > SIZE_MAX - (CRMM_ALLOCATION_ALIGNMENT - 1))
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%zu bytes cannot be rounded to the alignment", bytes);
    size_t rounded = (bytes + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(size_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
    pthread_once(&host_live_once, host_live_init);
    if (!host_live)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "no memory for the table of live blocks");
    void *p = aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, rounded);
    if (!p)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "aligned_alloc failed");
    crmm_status st = aligned_ptrmap_insert(host_live, p, (void *)(uintptr_t)bytes);
    if (st != CRMM_OK) {
        free(p);
        return st;
    }
    *ptr = p;
    return CRMM_OK;
}

static crmm_status host_free(void *ptr, size_t bytes)
{
    pthread_once(&host_live_once, host_live_init);
    if (host_live_gone) {
        free(ptr);
        return CRMM_OK;
    }
    void *size;
    if (!host_live || !aligned_ptrmap_remove(host_live, ptr, &size))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "host: free of %p: not a live block (freed twice, or not from host)", ptr);
    if ((uintptr_t)size != bytes) {
        /* put it back: the block stays live, and a free with the right size still works */
        crmm_status st = aligned_ptrmap_insert(host_live, ptr, size);
        if (st != CRMM_OK)
            return st;
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "host: free of %p as %zu bytes: it is a block of %zu bytes", ptr,
                              bytes, (size_t)(uintptr_t)size);
    }
    free(ptr);
    return CRMM_OK;
}

static const direct_backend host_backend = {
    .kind = "host", .flags = CRMM_RESOURCE_HOST_ACCESSIBLE, .uses_cuda = false,
    .alloc = host_alloc, .free = host_free,
};

static crmm_status host_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)params;
    (void)upstream;
    return direct_resource_create(&host_backend, out);
}

static const crmm_plugin host_plugin = {
    CRMM_PLUGIN_HEADER,
    .name = "host",
    .version = PACKAGE_VERSION,
    .description = "256-byte aligned host memory (aligned_alloc); needs no GPU; refuses a double free, a foreign pointer and a wrong size",
    .upstream = CRMM_UPSTREAM_NONE,
    .flags = CRMM_PLUGIN_HOST_MEMORY,
    .create = host_create,
};

CRMM_PLUGIN_DEFINE(host_plugin)
