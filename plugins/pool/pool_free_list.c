/* pool_free_list.c — the cold parts of the segregated-fit free list (see pool_free_list.h for the
 * structure): the scan of one class, the largest block, any block. The hot insert, remove and
 * find are inline in the header. */
#include "build_config.h"
#include "pool_free_list.h"

pool_block *pool_free_list_find_in_own_class(const pool_free_list *fl, size_t size)
{
    unsigned f, s;
    pool_free_list_class(size, &f, &s);
    for (pool_block *b = fl->heads[f][s]; b; b = b->u.free.next)
        if (b->size >= size)
            return b;
    return NULL;
}

pool_block *pool_free_list_largest(const pool_free_list *fl)
{
    if (!fl->fl_bitmap)
        return NULL;
    unsigned f = 63u - (unsigned)__builtin_clzll(fl->fl_bitmap);
    unsigned s = 31u - (unsigned)__builtin_clz(fl->sl_bitmap[f]);
    pool_block *best = NULL;
    for (pool_block *b = fl->heads[f][s]; b; b = b->u.free.next)
        if (!best || b->size > best->size)
            best = b;
    return best;
}

pool_block *pool_free_list_any(const pool_free_list *fl)
{
    if (!fl->fl_bitmap)
        return NULL;
    unsigned f = (unsigned)__builtin_ctzll(fl->fl_bitmap);
    return fl->heads[f][__builtin_ctz(fl->sl_bitmap[f])];
}

bool pool_free_list_for_each(const pool_free_list *fl, size_t min_size, bool (*fn)(pool_block *, void *), void *arg)
{
    unsigned f0, s0;
    pool_free_list_class(min_size, &f0, &s0);
    for (uint64_t fmap = fl->fl_bitmap & (~0ull << f0); fmap; fmap &= fmap - 1) {
        unsigned f = (unsigned)__builtin_ctzll(fmap);
        uint32_t smap = fl->sl_bitmap[f];
        if (f == f0)
            smap &= ~0u << s0;
        for (; smap; smap &= smap - 1)
            for (pool_block *b = fl->heads[f][__builtin_ctz(smap)]; b; b = b->u.free.next)
                if (b->size >= min_size && fn(b, arg))
                    return true;
    }
    return false;
}

struct aligned_run { size_t size, align; uintptr_t at; pool_block *found; };

static bool holds_aligned_run(pool_block *b, void *arg)
{
    struct aligned_run *r = arg;
    uintptr_t a = (b->addr + r->align - 1) & ~(uintptr_t)(r->align - 1);
    if (a < b->addr || a - b->addr > b->size || b->size - (a - b->addr) < r->size)
        return false;
    r->at = a;
    r->found = b;
    return true;
}

pool_block *pool_free_list_find_aligned(const pool_free_list *fl, size_t size, size_t align, uintptr_t *at)
{
    struct aligned_run r = {size, align, 0, NULL};
    pool_free_list_for_each(fl, size, holds_aligned_run, &r);
    *at = r.at;
    return r.found;
}
