/* pool_growth.c — the pool's upstream allocations ("chunks"): growing, trimming, releasing.
 *
 * Growth follows RMM's pool. Without a maximum the pool asks for max(request, current size), so
 * it doubles; with a maximum it asks for max(request, half the room left below the maximum),
 * which never passes the maximum. When the upstream refuses, the attempt is halved, down to the
 * request itself; when that fails too, or the maximum leaves no room for the request, the
 * allocation fails with CRMM_ERROR_OUT_OF_MEMORY and the sizes in the message. A request larger
 * than the maximum fails before any of that (pool_check_maximum): no synchronization, nothing
 * taken or given back. Each chunk becomes one free block of the stream that asked for it (memory
 * from upstream is usable on that stream at once); its blocks never merge with another chunk's,
 * even when the two are adjacent in memory, so every chunk can go back upstream whole.
 *
 * trim gives back each chunk whose blocks are all free, after a device synchronization for a
 * device pool: the last uses of its blocks may be pending on any stream, possibly one the user
 * destroyed, so the memory is returned (on the NULL stream) only once the device is idle. Once
 * it is, the free blocks of every stream are gathered into one list (pool_streams_make_all_ready),
 * which merges blocks that were freed on different streams: each such chunk becomes one free
 * block and goes back whole. destroy returns every chunk after the same synchronization. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/log.h>
#include "pool_resource.h"

static size_t round_up(uint64_t n)
{
    return (size_t)((n + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(uint64_t)(CRMM_ALLOCATION_ALIGNMENT - 1));
}

/* The out-of-memory error for a request of `size`, with `reason` after the sizes when given. */
static crmm_status out_of_memory(const pool_resource *p, size_t size, const char *reason)
{
    char label[80], req[32], have[32], limit[32], max[48];
    crmm_format_size(size, req, sizeof req);
    crmm_format_size(p->growth.reserved, have, sizeof have);
    if (p->growth.maximum == POOL_NO_MAXIMUM)
        snprintf(max, sizeof max, "no maximum");
    else
        snprintf(max, sizeof max, "maximum %s", crmm_format_size(p->growth.maximum, limit, sizeof limit));
    pool_label(p, label, sizeof label);
    if (reason && *reason)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: failed to allocate %s (pool size %s, %s): %s", label, req,
                              have, max, reason);
    return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: failed to allocate %s (pool size %s, %s)", label, req, have, max);
}

crmm_status pool_check_maximum(const pool_resource *p, size_t size)
{
    uint64_t maximum = p->growth.maximum;
    if (!p->growth.expandable)
        return maximum == POOL_NO_MAXIMUM || size <= maximum ? CRMM_OK
                                                             : out_of_memory(p, size, "more than its maximum size");
    /* the pool maps whole pages, never more than the maximum, the device's memory or its address
     * range: a block of `size` needs at least size / page pages, rounded up (counted so that no
     * sum can overflow) */
    size_t page = p->growth.vmm.page;
    uint64_t pages = size / page + (size % page != 0);
    char unit[32], reason[96];
    if (maximum != POOL_NO_MAXIMUM && pages > maximum / page)
        snprintf(reason, sizeof reason, "more pages of %s than its maximum size holds",
                 crmm_format_size(page, unit, sizeof unit));
    else if (pages > p->growth.device_memory / page)
        snprintf(reason, sizeof reason, "more than the device's %s",
                 crmm_format_size(p->growth.device_memory, unit, sizeof unit));
    else if (pages > p->growth.vmm.pages)
        snprintf(reason, sizeof reason, "more than its address range of %s holds",
                 crmm_format_size((uint64_t)p->growth.vmm.pages * page, unit, sizeof unit));
    else
        return CRMM_OK;
    return out_of_memory(p, size, reason);
}

/* Take `size` bytes from upstream as a new chunk whose single free block goes to state s. */
static crmm_status add_chunk(pool_resource *p, pool_stream *s, size_t size, crmm_cuda_stream_t stream, pool_block **out)
{
    pool_chunk *c = malloc(sizeof *c);
    if (!c || !pool_records_reserve(&p->core.records, 1)) {
        free(c);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "pool: malloc failed (chunk record)");
    }
    void *mem = NULL;
    pool_cache_calling_upstream(true); /* with p's lock held: an upstream pool makes no cache now */
    crmm_status st = crmm_resource_allocate(p->base.upstream, size, stream, &mem);
    pool_cache_calling_upstream(false);
    if (st != CRMM_OK) {
        free(c);
        return st;
    }
    if ((uintptr_t)mem % CRMM_ALLOCATION_ALIGNMENT) {
        crmm_resource_deallocate(p->base.upstream, mem, size, stream);
        free(c);
        return crmm_set_error(CRMM_ERROR_BAD_ALLOC, "pool: upstream %s returned %p, which is not %u-byte aligned",
                              crmm_resource_kind(p->base.upstream), mem, CRMM_ALLOCATION_ALIGNMENT);
    }
    pool_block *b = pool_records_take(&p->core.records);
    b->addr = (uintptr_t)mem;
    b->size = size;
    b->phys_prev = b->phys_next = NULL;
    b->owner = s;
    pool_free_list_insert(&s->free, b);
    *c = (pool_chunk){.addr = (uintptr_t)mem, .size = size, .first = b, .prev = NULL, .next = p->growth.chunks};
    if (p->growth.chunks)
        p->growth.chunks->prev = c;
    p->growth.chunks = c;
    p->growth.chunk_count++;
    p->growth.reserved += size;
    pool_raise_held_peak(p);
    *out = b;
    return CRMM_OK;
}

/* The error of a growth for `size` whose last upstream allocation failed with st: out of memory
 * naming the sizes and the upstream's reason, or the upstream's own error with the pool's context. */
static crmm_status growth_failed(const pool_resource *p, size_t size, crmm_status st)
{
    if (st != CRMM_ERROR_OUT_OF_MEMORY && st != CRMM_ERROR_BAD_ALLOC) {
        char label[80], req[32];
        return crmm_error_add_context("%s: failed to allocate %s", pool_label(p, label, sizeof label),
                                      crmm_format_size(size, req, sizeof req));
    }
    const char *why = crmm_last_error();
    if (strncmp(why, "out of memory: ", 15) == 0)
        why += 15;
    char reason[512];
    snprintf(reason, sizeof reason, "upstream: %s", why);
    return out_of_memory(p, size, *why ? reason : NULL);
}

crmm_status pool_add_chunk(pool_resource *p, pool_stream *s, size_t size, crmm_cuda_stream_t stream)
{
    if (p->growth.expandable)
        return pool_expand_map_initial(p, s, size);
    pool_block *b;
    return add_chunk(p, s, size, stream, &b);
}

crmm_status pool_grow(pool_resource *p, pool_stream *s, size_t size, crmm_cuda_stream_t stream, pool_block **out)
{
    if (p->growth.expandable)
        return pool_expand_grow(p, s, size, out);
    uint64_t attempt;
    if (p->growth.maximum == POOL_NO_MAXIMUM) {
        attempt = p->growth.reserved > size ? p->growth.reserved : size;
        if (attempt > POOL_MAX_REQUEST)
            attempt = size;
    } else {
        uint64_t room = p->growth.maximum > p->growth.reserved ? p->growth.maximum - p->growth.reserved : 0;
        if (size > room)
            return out_of_memory(p, size, NULL);
        attempt = round_up(room / 2); /* room is a multiple of 256, so this stays within it */
        if (attempt < size)
            attempt = size;
    }
    for (;;) {
        crmm_status st = add_chunk(p, s, (size_t)attempt, stream, out);
        if (st == CRMM_OK) {
            p->growth.growths++;
            return CRMM_OK;
        }
        if (attempt == size)
            return growth_failed(p, size, st);
        attempt = round_up(attempt / 2);
        if (attempt < size)
            attempt = size;
    }
}

crmm_status pool_grow_fresh(pool_resource *p, pool_stream *s, size_t size, crmm_cuda_stream_t stream, pool_block **out)
{
    if (p->growth.expandable)
        return pool_expand_grow_fresh(p, s, size, out);
    uint64_t room = p->growth.maximum == POOL_NO_MAXIMUM ? UINT64_MAX
                    : p->growth.maximum > p->growth.reserved ? p->growth.maximum - p->growth.reserved : 0;
    if (size > room)
        return out_of_memory(p, size, NULL);
    /* whole pages, so that a later capture of another graph can take them as whole free pages */
    size_t pages = size <= POOL_MAX_REQUEST - POOL_CAPTURE_SMALL_SEGMENT
                       ? (size + POOL_CAPTURE_SMALL_SEGMENT - 1) & ~(POOL_CAPTURE_SMALL_SEGMENT - 1) : size;
    crmm_status st = CRMM_ERROR_OUT_OF_MEMORY;
    if (pages > size && pages <= room) {
        if ((st = add_chunk(p, s, pages, stream, out)) != CRMM_OK)
            crmm_clear_error(); /* the request alone, below */
    }
    if (st != CRMM_OK && (st = add_chunk(p, s, size, stream, out)) != CRMM_OK)
        return growth_failed(p, size, st);
    p->growth.growths++;
    return CRMM_OK;
}

/* Unlink chunk c and give its memory back upstream. */
static crmm_status release_chunk(pool_resource *p, pool_chunk *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        p->growth.chunks = c->next;
    if (c->next)
        c->next->prev = c->prev;
    p->growth.chunk_count--;
    p->growth.reserved -= c->size;
    crmm_status st = crmm_resource_deallocate(p->base.upstream, (void *)c->addr, c->size, NULL);
    free(c);
    return st;
}

/* One free block covering the whole chunk. */
static bool wholly_free(const pool_chunk *c)
{
    return pool_block_is_free(c->first) && c->first->size == c->size;
}

/* Every block of the chunk free (on whatever streams). */
static bool all_blocks_free(const pool_chunk *c)
{
    for (const pool_block *b = c->first; b; b = b->phys_next)
        if (!pool_block_is_free(b))
            return false;
    return true;
}

crmm_status pool_trim(crmm_resource *self)
{
    pool_resource *p = (pool_resource *)self;
    if (p->growth.expandable)
        return pool_expand_trim(p);
    pool_lock(p);
    pool_capture_collect(p); /* destroyed graphs' blocks are free too */
    bool any = false;
    for (pool_chunk *c = p->growth.chunks; c && !any; c = c->next)
        any = all_blocks_free(c);
    crmm_status st = any ? pool_streams_synchronize(&p->core.streams) : CRMM_OK;
    if (!any || st != CRMM_OK) {
        pool_unlock(p);
        return st;
    }
    /* the device is idle: the free blocks of all streams can join, so that a chunk whose blocks
     * were freed on different streams becomes one free block */
    pool_streams_make_all_ready(&p->core.streams, &p->core.records);
    for (pool_chunk *c = p->growth.chunks, *next; c; c = next) {
        next = c->next;
        if (!wholly_free(c))
            continue;
        pool_block *b = c->first;
        pool_free_list_remove(&b->owner->free, b);
        pool_records_put(&p->core.records, b);
        crmm_status one = release_chunk(p, c);
        if (st == CRMM_OK)
            st = one;
    }
    pool_unlock(p);
    return st;
}

void pool_release_all(pool_resource *p)
{
    if (p->growth.expandable) {
        pool_expand_release_all(p);
        return;
    }
    if (!p->growth.chunks)
        return;
    if (pool_streams_synchronize(&p->core.streams) != CRMM_OK)
        crmm_log(CRMM_LOG_WARN, "%s; returning the pool's memory anyway", crmm_last_error());
    while (p->growth.chunks) {
        uintptr_t addr = p->growth.chunks->addr;
        size_t size = p->growth.chunks->size;
        if (release_chunk(p, p->growth.chunks) != CRMM_OK)
            crmm_log(CRMM_LOG_WARN, "pool: returning its chunk %#lx (%zu bytes) to the upstream failed: %s",
                     (unsigned long)addr, size, crmm_last_error());
    }
}

const pool_chunk *pool_chunk_containing(const pool_resource *p, uintptr_t addr)
{
    for (const pool_chunk *c = p->growth.chunks; c; c = c->next)
        if (addr >= c->addr && addr - c->addr < c->size)
            return c;
    return NULL;
}
