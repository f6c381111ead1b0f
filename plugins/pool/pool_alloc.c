/* pool_alloc.c — the pool's allocate and deallocate: the hot path.
 *
 * allocate rounds the size up to 256 bytes and, under the pool's lock, finds the caller's stream
 * state (a one-entry cache), takes the head of the first fitting class of its free list (two
 * bit scans) or else of the ready state's list (blocks any stream may use at once), cuts the rest
 * off as a free block of the same state, and puts the block in the live map. That is the whole
 * fast path: no CUDA call, no malloc, no scan. Anything else goes to
 * allocate_slow: spare records or map slots to allocate, a stream seen for the first time, and a
 * miss, which tries in turn the size's own class, the ready state's blocks (taken where they lie,
 * so the rest of a split stays shared), the other streams' free blocks (pool_streams_take:
 * ordered by a device synchronization or by an event, as stream_reuse says), growing from
 * upstream (pool_grow), and last the other streams' blocks again with a device synchronization
 * allowed whatever fits.
 *
 * deallocate removes the pointer from the live map (O(1); a pointer that is not there is refused
 * before anything changes: never handed out, already freed, or inside a block), merges the block
 * with its free neighbours of the same stream and files it under the stream it was freed on.
 * The `bytes` the caller passes are not needed: the block's record knows its size. */
#include "config.h"
#include "pool_resource.h"

static inline void count_allocation(pool_resource *p, size_t bytes, size_t size)
{
    crmm_counters_add_locked(&p->counters, bytes);
    p->live_bytes += size;
}

static inline void count_free(pool_resource *p, size_t bytes, size_t size)
{
    crmm_counters_sub_locked(&p->counters, bytes);
    p->live_bytes -= size;
}

/* Everything the fast path does not do; on CRMM_OK, *out is a free block of at least `size` in
 * the list of *sp, and a spare record and a map slot are ready. */
static crmm_status allocate_slow(pool_resource *p, crmm_cuda_stream_t stream, size_t size, pool_stream **sp,
                                 pool_block **out)
{
    char label[80];
    /* two spare records: a new chunk's block (growth) and the rest of a split */
    if (!pool_records_reserve(&p->records, 2) || !pool_block_map_grow(&p->live))
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed (block records)", pool_label(p, label, sizeof label));
    pool_stream *s = pool_streams_find(&p->streams, stream);
    if (!s)
        return crmm_error_add_context("%s", pool_label(p, label, sizeof label));
    *sp = s;
    if ((*out = pool_free_list_fit(&s->free, size)))
        return CRMM_OK;
    crmm_status st = pool_streams_take(&p->streams, &p->records, s, size, false, sp, out);
    if (st != CRMM_OK || *out)
        return st;
    st = pool_grow(p, s, size, stream, out);
    if (st != CRMM_ERROR_OUT_OF_MEMORY)
        return st;
    /* out of room: every other stream's blocks, after a device synchronization, are the last resort */
    crmm_status again = pool_streams_take(&p->streams, &p->records, s, size, true, sp, out);
    if (again != CRMM_OK)
        return again;
    return *out ? CRMM_OK : st;
}

crmm_status pool_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    pool_resource *p = (pool_resource *)self;
    if (__builtin_expect(bytes > POOL_MAX_REQUEST, 0)) {
        char label[80], sz[32];
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: failed to allocate %s (larger than any pool can be)",
                              pool_label(p, label, sizeof label), crmm_format_size(bytes, sz, sizeof sz));
    }
    size_t size = (bytes + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(size_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
    pool_lock(p);
    pool_stream *s = pool_streams_find(&p->streams, stream);
    pool_block *b = NULL;
    if (__builtin_expect(s && p->records.spare_count && pool_block_map_has_room(&p->live), 1)) {
        b = pool_free_list_find(&s->free, size);
        pool_stream *ready = p->streams.ready;
        if (!b && ready && (b = pool_free_list_find(&ready->free, size)))
            s = ready; /* any stream may use it at once; the rest of a split stays ready */
    }
    if (__builtin_expect(!b, 0)) {
        crmm_status st = allocate_slow(p, stream, size, &s, &b);
        if (st != CRMM_OK) {
            pool_unlock(p);
            return st;
        }
    }
    pool_free_list_remove(&s->free, b);
    if (b->size > size) {
        /* the rest stays free on this stream; its upper neighbour cannot be a free block of the
         * same stream (it would have merged with b), so it needs no merging */
        pool_block *rest = pool_records_take(&p->records);
        rest->addr = b->addr + size;
        rest->size = b->size - size;
        rest->phys_prev = b;
        rest->phys_next = b->phys_next;
        if (rest->phys_next)
            rest->phys_next->phys_prev = rest;
        b->phys_next = rest;
        b->size = size;
        rest->owner = s;
        pool_free_list_insert(&s->free, rest);
    }
    b->owner = NULL;
    b->u.live.requested = bytes;
    pool_block_map_insert(&p->live, b);
    count_allocation(p, bytes, size);
    pool_unlock(p);
    *ptr = (void *)b->addr;
    return CRMM_OK;
}

/* The message for a pointer that is not a live block of the pool (called with the lock held). */
static crmm_status refuse_pointer(pool_resource *p, void *ptr)
{
    char label[80];
    pool_label(p, label, sizeof label);
    uintptr_t a = (uintptr_t)ptr;
    const pool_chunk *c = pool_chunk_containing(p, a);
    if (!c)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: deallocate: %p was not allocated by this pool", label, ptr);
    for (const pool_block *b = c->first; b; b = b->phys_next) {
        if (a < b->addr || a >= b->addr + b->size)
            continue;
        if (pool_block_is_free(b))
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: deallocate: %p is already free (double free?)", label, ptr);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "%s: deallocate: %p points inside the allocation at %p, not at its start", label, ptr,
                              (void *)b->addr);
    }
    return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: deallocate: %p is not a live allocation", label, ptr);
}

crmm_status pool_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)bytes;
    pool_resource *p = (pool_resource *)self;
    pool_lock(p);
    pool_stream *s = pool_streams_find(&p->streams, stream);
    if (__builtin_expect(!s, 0)) {
        char label[80];
        pool_unlock(p);
        return crmm_error_add_context("%s: deallocate", pool_label(p, label, sizeof label));
    }
    pool_block *b = pool_block_map_remove(&p->live, (uintptr_t)ptr);
    if (__builtin_expect(!b, 0)) {
        crmm_status st = refuse_pointer(p, ptr);
        pool_unlock(p);
        return st;
    }
    count_free(p, b->u.live.requested, b->size);
    pool_free_list_insert_merging(&s->free, s, b, &p->records);
    pool_unlock(p);
    return CRMM_OK;
}
