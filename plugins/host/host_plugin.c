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
#include "../common/direct_resource.h"
#include "../common/ptr_map.h"

/* Every live block and its size, for all host resources of the process: a double free, a
 * pointer host never gave and a wrong size are refused instead of reaching free(). */
static sharded_ptr_map host_live_map; /* block -> its size in bytes */
static sharded_ptr_map *host_live;
static pthread_once_t host_live_once = PTHREAD_ONCE_INIT;

/* 16 shards: threads freeing different blocks rarely meet on a lock. */
#define HOST_LIVE_SHARD_BITS 4

static void host_live_init(void)
{
    if (sharded_ptr_map_init(&host_live_map, HOST_LIVE_SHARD_BITS, sizeof(ptr_map_pair)))
        host_live = &host_live_map;
}

/* At unload the table goes; a block freed after that (by another exit handler) is freed unchecked. */
static bool host_live_gone;
static void host_live_fini(void) __attribute__((destructor));
static void host_live_fini(void)
{
    sharded_ptr_map *m = host_live;
    host_live_gone = true;
    host_live = NULL;
    if (m)
        sharded_ptr_map_destroy(m);
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
    if (!sharded_ptr_map_put(host_live, (uintptr_t)p, bytes)) {
        free(p);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "cannot grow the table of live blocks");
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
    bool live = false;
    size_t size = 0;
    if (host_live) {
        ptr_map_shard *sh = sharded_ptr_map_shard(host_live, (uintptr_t)ptr);
        pthread_mutex_lock(&sh->lock);
        ptr_map_pair *e = ptr_map_find(&sh->map, (uintptr_t)ptr);
        if ((live = e != NULL) && (size = (size_t)e->value) == bytes)
            ptr_map_erase(&sh->map, e); /* a wrong size leaves the block live: the right one works */
        pthread_mutex_unlock(&sh->lock);
    }
    if (!live)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "host: free of %p: not a live block (freed twice, or not from host)", ptr);
    if (size != bytes)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "host: free of %p as %zu bytes: it is a block of %zu bytes", ptr,
                              bytes, size);
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
