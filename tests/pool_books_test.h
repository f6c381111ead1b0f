/* pool_books_test.h — what the pool's random-work suites (check_pool_invariants,
 * check_pool_stream_order) check of every block, read from the pool's own structures
 * (plugins/pool/pool_resource.h): each free block belongs to a known state, no two neighbouring
 * free blocks of one state nor two neighbouring parked blocks of one graph, stream and area are
 * left unmerged, every page under a mapped block of an expandable pool is mapped, and the pool's
 * reserved bytes are its mapped blocks'. */
#ifndef CRMM_TESTS_POOL_BOOKS_TEST_H
#define CRMM_TESTS_POOL_BOOKS_TEST_H

#include <stdbool.h>
#include <stdio.h>
#include "../plugins/pool/pool_resource.h"

static inline bool pool_books_is_stream_state(const pool_resource *p, const pool_stream *o)
{
    for (size_t i = 0; i < p->core.streams.count; i++)
        if (p->core.streams.all[i] == o)
            return true;
    return !p->core.streams.real && o == p->core.streams.last;
}

static inline bool pool_books_is_lent(const pool_resource *p, const pool_stream *o)
{
    for (int i = 0; p->growth.lent && i < POOL_LENT_BATCHES; i++)
        if (o == &p->growth.lent[i].pages)
            return true;
    return false;
}

/* The first of the checks above that fails (its message in msg), or NULL. */
static inline const char *pool_books_broken_blocks(const pool_resource *p, char *msg, size_t len)
{
    uint64_t mapped = 0;
    for (const pool_chunk *c = p->growth.chunks; c; c = c->next)
        for (const pool_block *b = c->first; b; b = b->phys_next) {
            const pool_stream *o = b->owner;
            bool unmapped = o == &p->growth.unmapped, lent = o && pool_books_is_lent(p, o);
            if (o && !unmapped && !lent && !pool_books_is_stream_state(p, o)) {
                snprintf(msg, len, "block %#lx+%zu: owned by no known state", (unsigned long)b->addr, b->size);
                return msg;
            }
            if (!unmapped && !lent)
                mapped += b->size;
            const pool_block *n = b->phys_next;
            if (n && o && n->owner == o) {
                snprintf(msg, len, "free blocks %#lx+%zu and %#lx+%zu of one state, not merged", (unsigned long)b->addr,
                         b->size, (unsigned long)n->addr, n->size);
                return msg;
            }
            if (n && !o && !n->owner && (b->graph & POOL_PARKED) && n->graph == b->graph) {
                snprintf(msg, len, "parked blocks %#lx and %#lx of one graph, stream and area, not merged",
                         (unsigned long)b->addr, (unsigned long)n->addr);
                return msg;
            }
            if (p->growth.expandable && !unmapped) {
                const pool_vmm *v = &p->growth.vmm;
                for (uintptr_t a = b->addr & ~(uintptr_t)(v->page - 1); a < b->addr + b->size; a += v->page)
                    if (!v->mapped[pool_vmm_page_of(v, a)]) {
                        snprintf(msg, len, "page %#lx under block %#lx not mapped", (unsigned long)a, (unsigned long)b->addr);
                        return msg;
                    }
            }
        }
    if (mapped != p->growth.reserved) {
        snprintf(msg, len, "reserved counted %llu, mapped blocks %llu", (unsigned long long)p->growth.reserved,
                 (unsigned long long)mapped);
        return msg;
    }
    return NULL;
}

#endif
