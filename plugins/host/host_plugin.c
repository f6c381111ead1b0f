/* host_plugin.c — the `host` plugin: 256-byte aligned host memory from aligned_alloc.
 *
 * Host accessible only, needs no GPU: the upstream the CPU test suite and `crmm bench` run
 * pool, arena and the adaptors over on a machine without one. A request larger than the
 * machine's physical memory is out of memory at once, without asking the C library (which, with
 * overcommit, might promise it; and which aborts under AddressSanitizer instead of failing). */
#include "build_config.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "../common/direct_resource.h"
#include "ptr_map.h"

/* Every live block and its size, for all host resources of the process: a double free, a
 * pointer host never gave and a wrong size are refused instead of reaching free(). The table is
 * made when the first host resource is created and freed when the last one is destroyed, never
 * at unload or exit: threads that still allocate while the process exits keep using it. */
static sharded_ptr_map host_live; /* block -> its size in bytes; its shards exist while host_users > 0 */
static size_t host_users;         /* host resources alive */
static pthread_mutex_t host_users_lock = PTHREAD_MUTEX_INITIALIZER; /* host_users and making the table */

/* 16 shards: threads freeing different blocks rarely meet on a lock. */
#define HOST_LIVE_SHARD_BITS 4

/* Around fork(): the users' lock, then (when the table exists) every shard's, so that a child can
 * create host resources and allocate from those it inherited. Added at the first create, removed
 * at unload. */
static crmm_fork_guard host_fork_guard;
static pthread_once_t host_fork_guard_once = PTHREAD_ONCE_INIT;

static void host_lock_for_fork(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&host_users_lock);
    if (host_users)
        sharded_ptr_map_lock_all(&host_live);
}

static void host_unlock_after_fork(void *arg)
{
    (void)arg;
    if (host_users)
        sharded_ptr_map_unlock_all(&host_live);
    pthread_mutex_unlock(&host_users_lock);
}

static void host_add_fork_guard(void)
{
    host_fork_guard = (crmm_fork_guard){.prepare = host_lock_for_fork, .parent = host_unlock_after_fork,
                                        .child = host_unlock_after_fork};
    crmm_fork_guard_add(&host_fork_guard);
}

static void host_unload(void) __attribute__((destructor));
static void host_unload(void)
{
    if (host_fork_guard.prepare)
        crmm_fork_guard_remove(&host_fork_guard);
}

static crmm_status host_open(void)
{
    pthread_once(&host_fork_guard_once, host_add_fork_guard);
    pthread_mutex_lock(&host_users_lock);
    bool ok = host_users || sharded_ptr_map_init(&host_live, HOST_LIVE_SHARD_BITS, sizeof(ptr_map_pair));
    if (ok)
        host_users++;
    pthread_mutex_unlock(&host_users_lock);
    return ok ? CRMM_OK : crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "no memory for the table of live blocks");
}

static void host_close(void)
{
    pthread_mutex_lock(&host_users_lock);
    if (--host_users == 0)
        sharded_ptr_map_destroy(&host_live);
    pthread_mutex_unlock(&host_users_lock);
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
    void *p = aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, rounded);
    if (!p)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "aligned_alloc failed");
    if (!sharded_ptr_map_put(&host_live, (uintptr_t)p, bytes)) {
        free(p);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "cannot grow the table of live blocks");
    }
    *ptr = p;
    return CRMM_OK;
}

static crmm_status host_free(void *ptr, size_t bytes)
{
    size_t size = 0;
    ptr_map_shard *sh = sharded_ptr_map_shard(&host_live, (uintptr_t)ptr);
    pthread_mutex_lock(&sh->lock);
    ptr_map_pair *e = ptr_map_find(&sh->map, (uintptr_t)ptr);
    bool live = e != NULL;
    if (live && (size = (size_t)e->value) == bytes)
        ptr_map_erase(&sh->map, e); /* a wrong size leaves the block live: the right one works */
    pthread_mutex_unlock(&sh->lock);
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
    .alloc = host_alloc, .free = host_free, .open = host_open, .close = host_close,
};

DIRECT_PLUGIN(host_backend, .name = "host", .flags = CRMM_PLUGIN_HOST_MEMORY,
              .description = "256-byte aligned host memory (aligned_alloc); needs no GPU; refuses a double free, a foreign pointer and a wrong size")
