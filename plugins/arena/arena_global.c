/* arena_global.c — the global arena: shards of spans of pages in TLSF-style segregated free lists.
 *
 * Within a shard, a free span of n pages sits in list (fl, sl): fl = floor(log2 n) - 2 and sl the
 * next three bits of n (n < 8: fl 0, sl n). Looking for n pages first rounds n up to the next list
 * boundary so that any span of that list or above fits (two bitmap scans, O(1)); when none does,
 * the list n itself is searched, because a span there may still be big enough — the arena never
 * grows, so a fit that exists must be found. A span is cut from its start; the rest goes back to
 * the lists. Freeing merges with the free neighbours found through the page map's first and last
 * entries, never across the shard's ends.
 *
 * Taking pages (a large block or a superblock): the home shard, then the next ones in order; a
 * shard whose free pages (read without its lock) are too few is skipped without locking it. When
 * no shard alone has room but the free pages of all add up, every lock is taken in order and the
 * shards are tried once more, then the runs of free pages across shard boundaries (the free span
 * at the end of one shard, any shards that are free whole, the free span at the start of the
 * next): the first long enough is cut into a span across shards (see arena_global.h). */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "arena_global.h"
#include "arena_slab.h"

struct arena_span_chunk {
    arena_span_chunk *next;
    arena_span spans[255];
};

static unsigned floor_log2(size_t n) { return 63u - (unsigned)__builtin_clzll((unsigned long long)n); }

static void list_of(size_t n, unsigned *fl, unsigned *sl)
{
    if (n < ARENA_TLSF_SL) {
        *fl = 0;
        *sl = (unsigned)n;
        return;
    }
    unsigned f = floor_log2(n);
    *sl = (unsigned)(n >> (f - ARENA_TLSF_SL_LOG)) ^ ARENA_TLSF_SL;
    *fl = f - ARENA_TLSF_SL_LOG + 1;
}

static inline void map_set(arena_global *g, size_t page, uintptr_t entry)
{
    __atomic_store_n(&g->page_map[page], entry, __ATOMIC_RELEASE);
}

static inline uintptr_t map_get(const arena_global *g, size_t page)
{
    return __atomic_load_n(&g->page_map[page], __ATOMIC_RELAXED);
}

static void map_span_ends(arena_global *g, arena_span *s)
{
    uintptr_t e = (uintptr_t)s | ARENA_ENTRY_SPAN;
    map_set(g, s->start, e);
    map_set(g, s->start + s->npages - 1, e);
}

/* free_pages is written under the shard's lock and read without it as a hint. */
static inline size_t free_hint(const arena_shard *sh) { return __atomic_load_n(&sh->free_pages, __ATOMIC_RELAXED); }
static inline void free_add(arena_shard *sh, size_t n)
{
    __atomic_store_n(&sh->free_pages, sh->free_pages + n, __ATOMIC_RELAXED);
}
static inline void free_sub(arena_shard *sh, size_t n)
{
    __atomic_store_n(&sh->free_pages, sh->free_pages - n, __ATOMIC_RELAXED);
}

static void list_insert(arena_shard *sh, arena_span *s)
{
    unsigned fl, sl;
    list_of(s->npages, &fl, &sl);
    s->fl = fl;
    s->sl = sl;
    s->prev = NULL;
    s->next = sh->bins[fl][sl];
    if (s->next)
        s->next->prev = s;
    sh->bins[fl][sl] = s;
    sh->fl_map |= (uint64_t)1 << fl;
    sh->sl_map[fl] |= 1u << sl;
}

static void list_remove(arena_shard *sh, arena_span *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        sh->bins[s->fl][s->sl] = s->next;
    if (s->next)
        s->next->prev = s->prev;
    if (!sh->bins[s->fl][s->sl]) {
        sh->sl_map[s->fl] &= ~(1u << s->sl);
        if (!sh->sl_map[s->fl])
            sh->fl_map &= ~((uint64_t)1 << s->fl);
    }
    s->prev = s->next = NULL;
}

static arena_span *span_new(arena_shard *sh)
{
    if (!sh->spare) {
        arena_span_chunk *c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        c->next = sh->chunks;
        sh->chunks = c;
        for (size_t i = 0; i < sizeof c->spans / sizeof c->spans[0]; i++) {
            c->spans[i].next = sh->spare;
            sh->spare = &c->spans[i];
        }
    }
    arena_span *s = sh->spare;
    sh->spare = s->next;
    memset(s, 0, sizeof *s);
    return s;
}

static void span_recycle(arena_shard *sh, arena_span *s)
{
    s->kind = ARENA_SPAN_SPARE;
    s->slab = NULL;
    s->pieces = NULL;
    s->prev = NULL;
    s->next = sh->spare;
    sh->spare = s;
}

static arena_span *find_fit(arena_shard *sh, size_t n)
{
    size_t rounded = n < ARENA_TLSF_SL ? n : n + ((size_t)1 << (floor_log2(n) - ARENA_TLSF_SL_LOG)) - 1;
    unsigned fl, sl;
    list_of(rounded, &fl, &sl);
    uint32_t slm = fl < ARENA_TLSF_FL ? sh->sl_map[fl] & (~0u << sl) : 0;
    if (!slm) {
        uint64_t flm = fl + 1 < ARENA_TLSF_FL ? sh->fl_map & (~(uint64_t)0 << (fl + 1)) : 0;
        if (flm) {
            fl = (unsigned)__builtin_ctzll(flm);
            slm = sh->sl_map[fl];
        }
    }
    if (slm)
        return sh->bins[fl][__builtin_ctz(slm)];
    list_of(n, &fl, &sl);
    for (arena_span *s = sh->bins[fl][sl]; s; s = s->next)
        if (s->npages >= n)
            return s;
    return NULL;
}

/* Cut n pages from a free span of shard sh that fits; the caller sets the kind and the page map. */
static crmm_status take_pages(arena_global *g, arena_shard *sh, size_t n, arena_span **out)
{
    arena_span *s = find_fit(sh, n);
    if (!s)
        return CRMM_ERROR_OUT_OF_MEMORY;
    if (s->npages > n) {
        arena_span *rest = span_new(sh);
        if (!rest)
            return crmm_set_error(CRMM_ERROR_BAD_ALLOC, "arena: no host memory for a span record");
        list_remove(sh, s);
        rest->kind = ARENA_SPAN_FREE;
        rest->start = s->start + n;
        rest->npages = s->npages - n;
        s->npages = n;
        map_span_ends(g, rest);
        list_insert(sh, rest);
    } else {
        list_remove(sh, s);
    }
    free_sub(sh, n);
    *out = s;
    return CRMM_OK;
}

/* The free span whose last page is `page`, or NULL (the caller holds the lock of page's shard). */
static arena_span *free_span_ending_at(arena_global *g, size_t page)
{
    uintptr_t e = map_get(g, page);
    if (!(e & ARENA_ENTRY_SPAN))
        return NULL;
    arena_span *s = arena_entry_span(e);
    return s->kind == ARENA_SPAN_FREE && s->start + s->npages == page + 1 ? s : NULL;
}

static arena_span *free_span_starting_at(arena_global *g, size_t page)
{
    uintptr_t e = map_get(g, page);
    if (!(e & ARENA_ENTRY_SPAN))
        return NULL;
    arena_span *s = arena_entry_span(e);
    return s->kind == ARENA_SPAN_FREE && s->start == page ? s : NULL;
}

/* Make span s (within shard sh) free and merge it with its free neighbours in the shard. */
static void give_pages(arena_global *g, arena_shard *sh, arena_span *s)
{
    free_add(sh, s->npages);
    s->kind = ARENA_SPAN_FREE;
    s->slab = NULL;
    s->bytes = 0;
    s->pieces = NULL;
    arena_span *prev = s->start > sh->first ? free_span_ending_at(g, s->start - 1) : NULL;
    if (prev) {
        list_remove(sh, prev);
        prev->npages += s->npages;
        span_recycle(sh, s);
        s = prev;
    }
    size_t end = s->start + s->npages;
    arena_span *next = end < sh->end ? free_span_starting_at(g, end) : NULL;
    if (next) {
        list_remove(sh, next);
        s->npages += next->npages;
        span_recycle(sh, next);
    }
    map_span_ends(g, s);
    list_insert(sh, s);
}

/* The largest free span of a shard, in pages (its lock held): it is in the highest list. */
static size_t shard_largest(const arena_shard *sh)
{
    size_t largest = 0;
    if (sh->fl_map) {
        unsigned fl = floor_log2(sh->fl_map);
        unsigned sl = 31u - (unsigned)__builtin_clz(sh->sl_map[fl]);
        for (const arena_span *s = sh->bins[fl][sl]; s; s = s->next)
            if (s->npages > largest)
                largest = s->npages;
    }
    return largest;
}

static void lock_all(arena_global *g)
{
    for (unsigned k = 0; k < g->nshards; k++)
        pthread_mutex_lock(&g->shards[k].lock);
}

static void unlock_all(arena_global *g)
{
    for (unsigned k = g->nshards; k-- > 0;)
        pthread_mutex_unlock(&g->shards[k].lock);
}

/* ---- spans across shards (all locks held) ------------------------------------------------- */

/* With n > 0: the first run of at least n free pages that crosses a shard boundary, its first
 * shard in *from and its last in *to; 0 when there is none. With n == 0: the longest such run. */
static size_t run_across(arena_global *g, size_t n, unsigned *from, unsigned *to)
{
    size_t run = 0, best = 0;
    unsigned run_from = 0;
    for (unsigned k = 0; k < g->nshards; k++) {
        arena_shard *sh = &g->shards[k];
        arena_span *head = free_span_starting_at(g, sh->first);
        if (run && head) {
            size_t len = run + head->npages;
            if (n && len >= n) {
                *from = run_from;
                *to = k;
                return len;
            }
            if (len > best)
                best = len;
            if (head->npages == sh->end - sh->first) { /* free whole: the run goes on */
                run = len;
                continue;
            }
        }
        arena_span *tail = free_span_ending_at(g, sh->end - 1);
        run = tail ? tail->npages : 0;
        run_from = k;
    }
    return n ? 0 : best;
}

/* Cut n pages from the run that run_across found from shard `from` to shard `to`: the free span
 * at the end of `from` becomes the span (returned, kind still to set), the free spans at the start
 * of the later shards become its pieces; what is left of the last one stays free. */
static crmm_status carve_across(arena_global *g, unsigned from, unsigned to, size_t n, arena_span **out)
{
    arena_shard *first = &g->shards[from], *last = &g->shards[to];
    arena_span *s = free_span_ending_at(g, first->end - 1);
    arena_span *head = free_span_starting_at(g, last->first);
    size_t in_last = n - (first->end - s->start) - (last->first - first->end);
    arena_span *rest = NULL;
    if (head->npages > in_last) {
        rest = span_new(last);
        if (!rest)
            return crmm_set_error(CRMM_ERROR_BAD_ALLOC, "arena: no host memory for a span record");
    }
    list_remove(first, s);
    free_sub(first, s->npages);
    arena_span **link = &s->pieces;
    for (unsigned k = from + 1; k <= to; k++) {
        arena_shard *sh = &g->shards[k];
        arena_span *p = free_span_starting_at(g, sh->first);
        list_remove(sh, p);
        if (k == to && rest) {
            rest->kind = ARENA_SPAN_FREE;
            rest->start = p->start + in_last;
            rest->npages = p->npages - in_last;
            p->npages = in_last;
            map_span_ends(g, rest);
            list_insert(sh, rest);
        }
        free_sub(sh, p->npages);
        p->kind = ARENA_SPAN_PIECE;
        *link = p;
        link = &p->pieces;
    }
    *link = NULL;
    s->npages = n;
    *out = s;
    return CRMM_OK;
}

/* Give span s (LARGE or SUPERBLOCK, counted out already) back to the shards it covers. sh, the
 * shard it starts in, is locked by the caller; the later ones are locked here. */
static void release_span(arena_global *g, arena_shard *sh, arena_span *s)
{
    unsigned to = sh->index;
    arena_span *p = s->pieces;
    if (p) {
        to = arena_global_shard_of(g, s->start + s->npages - 1);
        for (unsigned k = sh->index + 1; k <= to; k++)
            pthread_mutex_lock(&g->shards[k].lock);
        s->pieces = NULL;
        s->npages = sh->end - s->start;
    }
    bool large = s->kind == ARENA_SPAN_LARGE;
    if (large)
        sh->large_pages -= s->npages;
    while (p) {
        arena_span *next = p->pieces;
        arena_shard *ps = &g->shards[arena_global_shard_of(g, p->start)];
        if (large)
            ps->large_pages -= p->npages;
        map_span_ends(g, p); /* the span's last page mapped to s: now to a record of this shard */
        give_pages(g, ps, p);
        p = next;
    }
    give_pages(g, sh, s);
    for (unsigned k = to; k > sh->index; k--)
        pthread_mutex_unlock(&g->shards[k].lock);
}

/* ---- taking pages ------------------------------------------------------------------------- */

typedef struct take_request {
    size_t npages;
    arena_span_kind kind;          /* LARGE or SUPERBLOCK */
    size_t bytes;                  /* LARGE: as requested */
    arena_slab *slab;              /* SUPERBLOCK: the record to set up, its class and owner */
    unsigned cls;
    struct arena_thread *owner;
} take_request;

/* Make s, just taken from shard sh (every shard it covers locked), what q asks for. */
static void claim(arena_global *g, arena_shard *sh, arena_span *s, const take_request *q)
{
    if (q->kind == ARENA_SPAN_LARGE) {
        s->kind = ARENA_SPAN_LARGE;
        s->bytes = q->bytes;
        map_span_ends(g, s);
        sh->large_blocks++;
        sh->large_pages += s->pieces ? sh->end - s->start : s->npages;
        for (const arena_span *p = s->pieces; p; p = p->pieces)
            g->shards[arena_global_shard_of(g, p->start)].large_pages += p->npages;
        return;
    }
    arena_slab *slab = q->slab;
    s->kind = ARENA_SPAN_SUPERBLOCK;
    s->slab = slab;
    slab->base = g->base + (s->start << g->page_shift);
    slab->span = s;
    arena_slab_format(slab, s->npages << g->page_shift, q->cls);
    __atomic_store_n(&slab->owner, q->owner, __ATOMIC_RELAXED);
    arena_slab_set_state(slab, ARENA_SLAB_OWNED);
    map_set(g, s->start, (uintptr_t)s | ARENA_ENTRY_SPAN);
    for (size_t p = s->start + 1; p < s->start + s->npages; p++)
        map_set(g, p, (uintptr_t)slab);
    sh->superblocks++;
}

static inline unsigned next_shard(const arena_global *g, unsigned k) { return k + 1 == g->nshards ? 0 : k + 1; }

/* Under every lock: each shard once more (home first), then the runs across shards. */
static crmm_status take_across(arena_global *g, unsigned home, const take_request *q, arena_span **out)
{
    lock_all(g);
    crmm_status st = CRMM_ERROR_OUT_OF_MEMORY;
    arena_shard *sh = NULL;
    unsigned k = home;
    for (unsigned i = 0; i < g->nshards && st == CRMM_ERROR_OUT_OF_MEMORY; i++, k = next_shard(g, k)) {
        sh = &g->shards[k];
        st = take_pages(g, sh, q->npages, out);
    }
    unsigned from, to;
    if (st == CRMM_ERROR_OUT_OF_MEMORY && run_across(g, q->npages, &from, &to)) {
        sh = &g->shards[from];
        st = carve_across(g, from, to, q->npages, out);
    }
    if (st == CRMM_OK)
        claim(g, sh, *out, q);
    unlock_all(g);
    return st;
}

static crmm_status take(arena_global *g, unsigned home, const take_request *q, arena_span **out)
{
    size_t n = q->npages, total = 0;
    unsigned k = home < g->nshards ? home : 0;
    for (unsigned i = 0; i < g->nshards; i++, k = next_shard(g, k)) {
        arena_shard *sh = &g->shards[k];
        size_t hint = free_hint(sh);
        total += hint;
        if (hint < n)
            continue;
        pthread_mutex_lock(&sh->lock);
        crmm_status st = take_pages(g, sh, n, out);
        if (st == CRMM_OK)
            claim(g, sh, *out, q);
        pthread_mutex_unlock(&sh->lock);
        if (st != CRMM_ERROR_OUT_OF_MEMORY)
            return st;
    }
    if (g->nshards == 1 || total < n)
        return CRMM_ERROR_OUT_OF_MEMORY;
    return take_across(g, home < g->nshards ? home : 0, q, out);
}

/* ---- the interface ------------------------------------------------------------------------ */

void arena_global_fini(arena_global *g)
{
    for (unsigned k = 0; g->shards && k < g->nshards; k++) {
        arena_shard *sh = &g->shards[k];
        while (sh->chunks) {
            arena_span_chunk *c = sh->chunks;
            sh->chunks = c->next;
            free(c);
        }
        pthread_mutex_destroy(&sh->lock);
    }
    free(g->shards);
    g->shards = NULL;
    free(g->page_map);
    g->page_map = NULL;
}

crmm_status arena_global_init(arena_global *g, void *base, size_t size, size_t superblock_size, unsigned nshards)
{
    memset(g, 0, sizeof *g);
    g->base = base;
    g->page_size = superblock_size / ARENA_PAGES_PER_SUPERBLOCK;
    g->page_shift = floor_log2(g->page_size);
    g->npages = size >> g->page_shift;
    g->size = g->npages << g->page_shift;
    g->superblock_pages = ARENA_PAGES_PER_SUPERBLOCK;
    g->page_map = calloc(g->npages, sizeof *g->page_map);
    if (!g->page_map)
        return crmm_set_error(CRMM_ERROR_BAD_ALLOC, "arena: no host memory for the page map (%zu pages)", g->npages);
    g->shards = aligned_alloc(64, nshards * sizeof *g->shards);
    if (!g->shards) {
        free(g->page_map);
        return crmm_set_error(CRMM_ERROR_BAD_ALLOC, "arena: no host memory for %u shards", nshards);
    }
    memset(g->shards, 0, nshards * sizeof *g->shards);
    g->nshards = nshards;
    g->shard_pages = g->npages / nshards;
    /* large requests take these locks: spin a little before sleeping (one shard, set C: 450 → 390 ns/op) */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    for (unsigned k = 0; k < nshards; k++) {
        arena_shard *sh = &g->shards[k];
        sh->index = k;
        sh->first = (size_t)k * g->shard_pages;
        sh->end = k + 1 == nshards ? g->npages : sh->first + g->shard_pages;
        pthread_mutex_init(&sh->lock, &attr);
    }
    pthread_mutexattr_destroy(&attr);
    for (unsigned k = 0; k < nshards; k++) {
        arena_shard *sh = &g->shards[k];
        arena_span *all = span_new(sh);
        if (!all) {
            arena_global_fini(g);
            return crmm_set_error(CRMM_ERROR_BAD_ALLOC, "arena: no host memory for a span record");
        }
        all->start = sh->first;
        all->npages = sh->end - sh->first;
        give_pages(g, sh, all);
    }
    return CRMM_OK;
}

crmm_status arena_global_take_superblock(arena_global *g, unsigned home, arena_slab *slab, unsigned cls,
                                         struct arena_thread *owner)
{
    take_request q = {.npages = g->superblock_pages, .kind = ARENA_SPAN_SUPERBLOCK, .slab = slab, .cls = cls,
                      .owner = owner};
    arena_span *s;
    return take(g, home, &q, &s);
}

void arena_global_give_superblock(arena_global *g, arena_span *span)
{
    arena_shard *sh = &g->shards[arena_global_shard_of(g, span->start)];
    pthread_mutex_lock(&sh->lock);
    sh->superblocks--;
    release_span(g, sh, span);
    pthread_mutex_unlock(&sh->lock);
}

crmm_status arena_global_alloc_large(arena_global *g, unsigned home, size_t bytes, void **ptr)
{
    take_request q = {.npages = (bytes + g->page_size - 1) >> g->page_shift, .kind = ARENA_SPAN_LARGE, .bytes = bytes};
    arena_span *s;
    crmm_status st = take(g, home, &q, &s);
    if (st == CRMM_OK)
        *ptr = g->base + (s->start << g->page_shift);
    return st;
}

crmm_status arena_global_free_large(arena_global *g, void *ptr, size_t bytes, const char *who)
{
    uintptr_t off = (uintptr_t)ptr - (uintptr_t)g->base;
    if (off >= g->size)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %p was not allocated by this arena", who, ptr);
    arena_shard *sh = &g->shards[arena_global_shard_of(g, off >> g->page_shift)];
    pthread_mutex_lock(&sh->lock);
    uintptr_t e = arena_global_entry(g, ptr);
    arena_span *s = arena_entry_span(e);
    if (!(e & ARENA_ENTRY_SPAN) || s->kind != ARENA_SPAN_LARGE || (s->start << g->page_shift) != off) {
        pthread_mutex_unlock(&sh->lock);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %p is not a live block of this arena (freed twice?)", who, ptr);
    }
    if (s->bytes != bytes) {
        size_t was = s->bytes;
        pthread_mutex_unlock(&sh->lock);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %p was allocated with %zu bytes, freed with %zu", who,
                              ptr, was, bytes);
    }
    sh->large_blocks--;
    release_span(g, sh, s);
    pthread_mutex_unlock(&sh->lock);
    return CRMM_OK;
}

void arena_global_usage(arena_global *g, size_t *free_bytes, size_t *largest_free)
{
    lock_all(g);
    size_t free_pages = 0, largest = 0;
    for (unsigned k = 0; k < g->nshards; k++) {
        free_pages += g->shards[k].free_pages;
        size_t l = shard_largest(&g->shards[k]);
        if (l > largest)
            largest = l;
    }
    unsigned from, to;
    size_t across = g->nshards > 1 ? run_across(g, 0, &from, &to) : 0;
    if (across > largest)
        largest = across;
    unlock_all(g);
    *free_bytes = free_pages << g->page_shift;
    *largest_free = largest << g->page_shift;
}

void arena_global_counts(arena_global *g, size_t *superblocks, size_t *large_blocks)
{
    *superblocks = *large_blocks = 0;
    for (unsigned k = 0; k < g->nshards; k++) {
        arena_shard *sh = &g->shards[k];
        pthread_mutex_lock(&sh->lock);
        *superblocks += sh->superblocks;
        *large_blocks += sh->large_blocks;
        pthread_mutex_unlock(&sh->lock);
    }
}

void arena_global_shard_usage(arena_global *g, unsigned shard, arena_shard_usage *out)
{
    arena_shard *sh = &g->shards[shard];
    pthread_mutex_lock(&sh->lock);
    out->offset = sh->first << g->page_shift;
    out->size = (sh->end - sh->first) << g->page_shift;
    out->free_bytes = sh->free_pages << g->page_shift;
    out->largest_free = shard_largest(sh) << g->page_shift;
    out->superblocks = sh->superblocks;
    out->large_blocks = sh->large_blocks;
    out->large_bytes = sh->large_pages << g->page_shift;
    pthread_mutex_unlock(&sh->lock);
}

void arena_global_walk(arena_global *g, void (*fn)(const arena_span *span, void *arg), void *arg)
{
    lock_all(g);
    size_t page = 0;
    while (page < g->npages) {
        uintptr_t e = map_get(g, page);
        const arena_span *s = arena_entry_span(e); /* a span's first page always maps to it */
        fn(s, arg);
        page += s->npages;
    }
    unlock_all(g);
}
