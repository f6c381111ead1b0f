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
 * next): the first long enough is cut into a span across shards (see arena_global.h).
 *
 * Tags (device memory). A span freed on stream S is tagged (S, the shard's epoch). Merging two
 * free neighbours: a side whose tag is void (untagged, or its epoch below the shard's `synced`)
 * adds no wait, so the span takes the other side's tag; two live tags of one stream give that
 * stream with the later epoch; two live tags of different streams give "mixed" with the later
 * epoch, which no stream may take without a synchronization (S neither: the other part may
 * still be in use on the other stream) until the epochs void it. The rest of a span that is cut
 * keeps its tag. Taking pages for T looks, home shard first, for a fit whose tag is void or T's:
 * in each shard the span the free lists offer first, else up to ARENA_TAG_SCAN further fitting
 * spans in list order (bounded, under the lock: far cheaper than the device synchronization it
 * saves each time threads on different streams share a shard). When every shard offers
 * only spans tagged for other streams, arena_global_synchronize waits for the device
 * without a lock (the shards' epochs move on first, so that a free during the wait is not
 * voided by it), and the shards are tried again. A span tagged anew in that moment, or one of a
 * run across shards, is taken after a synchronization under the lock(s) held: rare paths. */
#include "build_config.h"
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

/* ---- tags (under the shard's lock) ------------------------------------------------------- */

static const arena_tag untagged = {{0, 0}, 0};

static inline bool same_stream(arena_stream_id a, arena_stream_id b)
{
    return a.handle == b.handle && a.thread == b.thread;
}

/* Untagged, or tagged before the shard's last device synchronization began. */
static inline bool tag_void(const arena_shard *sh, arena_tag t) { return t.epoch < sh->synced; }

/* May `stream` (NULL: host memory) take a span tagged t without a wait? */
static inline bool tag_allows(const arena_shard *sh, arena_tag t, const arena_stream_id *stream)
{
    return !stream || tag_void(sh, t) || (t.stream.thread != ARENA_STREAM_MIXED && same_stream(t.stream, *stream));
}

/* The tag of two free neighbours merged: whoever may take it without a wait may take both. */
static arena_tag tag_merge(const arena_shard *sh, arena_tag a, arena_tag b)
{
    if (tag_void(sh, a))
        return tag_void(sh, b) ? untagged : b;
    if (tag_void(sh, b))
        return a;
    arena_tag m = {a.stream, a.epoch > b.epoch ? a.epoch : b.epoch};
    if (!same_stream(a.stream, b.stream))
        m.stream = (arena_stream_id){0, ARENA_STREAM_MIXED};
    return m;
}

/* The tag of pages freed now on `stream` in shard sh (NULL: untagged). */
static inline arena_tag tag_now(const arena_shard *sh, const arena_stream_id *stream)
{
    return stream ? (arena_tag){*stream, sh->epoch} : untagged;
}

static const arena_stream_id mixed_stream = {0, ARENA_STREAM_MIXED};

/* How many fitting spans a search for `stream` looks at, at most, for one it may take without a
 * wait before it settles for the first fit. */
#define ARENA_TAG_SCAN 64

/* A free span of shard sh with at least n pages, or NULL: the first the lists offer, unless
 * `stream` may not take it without a wait and one of the next fitting spans (ARENA_TAG_SCAN in
 * all, in list order) it may. */
static arena_span *find_fit(arena_shard *sh, size_t n, const arena_stream_id *stream)
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
    if (slm) {
        sl = (unsigned)__builtin_ctz(slm);
        arena_span *first = sh->bins[fl][sl];
        if (tag_allows(sh, first->tag, stream))
            return first;
        /* every span of this list and the higher ones fits: look at a few for one that allows */
        unsigned looked = 0;
        for (;;) {
            for (arena_span *s = sh->bins[fl][sl]; s && looked < ARENA_TAG_SCAN; s = s->next, looked++)
                if (tag_allows(sh, s->tag, stream))
                    return s;
            if (looked >= ARENA_TAG_SCAN)
                return first;
            slm = sh->sl_map[fl] & (~1u << sl);
            if (!slm) {
                uint64_t flm = fl + 1 < ARENA_TLSF_FL ? sh->fl_map & (~(uint64_t)0 << (fl + 1)) : 0;
                if (!flm)
                    return first;
                fl = (unsigned)__builtin_ctzll(flm);
                slm = sh->sl_map[fl];
            }
            sl = (unsigned)__builtin_ctz(slm);
        }
    }
    list_of(n, &fl, &sl); /* spans of this list may be too small: the first that is not */
    arena_span *first = NULL;
    unsigned looked = 0;
    for (arena_span *s = sh->bins[fl][sl]; s && looked < ARENA_TAG_SCAN; s = s->next)
        if (s->npages >= n) {
            if (tag_allows(sh, s->tag, stream))
                return s;
            if (!first)
                first = s;
            looked++;
        }
    return first;
}

static crmm_status sync_held(arena_global *g, unsigned from, unsigned to);

/* Span s (out of its shard's free list) keeps its first n pages; `rest`, a fresh record, becomes
 * the free span of the pages after them, with s's tag, listed in shard sh. */
static void split_off_rest(arena_global *g, arena_shard *sh, arena_span *s, size_t n, arena_span *rest)
{
    rest->kind = ARENA_SPAN_FREE;
    rest->start = s->start + n;
    rest->npages = s->npages - n;
    rest->tag = s->tag;
    s->npages = n;
    map_span_ends(g, rest);
    list_insert(sh, rest);
}

/* Cut n pages for `stream` from a free span of shard sh (locked) that fits; the caller sets the
 * kind and the page map. A fit tagged for another stream: with `may_sync` the device is
 * synchronized first (under the lock); without, *tagged is set and nothing is taken
 * (CRMM_ERROR_OUT_OF_MEMORY). */
static crmm_status take_pages(arena_global *g, arena_shard *sh, size_t n, const arena_stream_id *stream,
                              bool may_sync, bool *tagged, arena_span **out)
{
    arena_span *s = find_fit(sh, n, stream);
    if (!s)
        return CRMM_ERROR_OUT_OF_MEMORY;
    if (!tag_allows(sh, s->tag, stream)) {
        if (!may_sync) {
            *tagged = true;
            return CRMM_ERROR_OUT_OF_MEMORY;
        }
        crmm_status st = sync_held(g, sh->index, sh->index);
        if (st != CRMM_OK)
            return st;
    }
    arena_span *rest = NULL;
    if (s->npages > n && !(rest = span_new(sh)))
        return crmm_set_error(CRMM_ERROR_BAD_ALLOC, "arena: no host memory for a span record");
    list_remove(sh, s);
    if (rest)
        split_off_rest(g, sh, s, n, rest);
    s->tag = untagged;
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

/* Make span s (within shard sh) free, tagged t, and merge it with its free neighbours in the
 * shard. */
static void give_pages(arena_global *g, arena_shard *sh, arena_span *s, arena_tag t)
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
        t = tag_merge(sh, prev->tag, t);
        span_recycle(sh, s);
        s = prev;
    }
    size_t end = s->start + s->npages;
    arena_span *next = end < sh->end ? free_span_starting_at(g, end) : NULL;
    if (next) {
        list_remove(sh, next);
        s->npages += next->npages;
        t = tag_merge(sh, t, next->tag);
        span_recycle(sh, next);
    }
    s->tag = t;
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
        if (k == to && rest)
            split_off_rest(g, sh, p, in_last, rest);
        free_sub(sh, p->npages);
        p->kind = ARENA_SPAN_PIECE;
        p->tag = untagged;
        *link = p;
        link = &p->pieces;
    }
    *link = NULL;
    s->npages = n;
    s->tag = untagged;
    *out = s;
    return CRMM_OK;
}

/* May `stream` take the run from shard `from` to shard `to` (as run_across found it) without a
 * wait? Every free span it is made of must allow it. */
static bool run_allows(arena_global *g, unsigned from, unsigned to, const arena_stream_id *stream)
{
    arena_shard *first = &g->shards[from];
    if (!tag_allows(first, free_span_ending_at(g, first->end - 1)->tag, stream))
        return false;
    for (unsigned k = from + 1; k <= to; k++) {
        arena_shard *sh = &g->shards[k];
        if (!tag_allows(sh, free_span_starting_at(g, sh->first)->tag, stream))
            return false;
    }
    return true;
}

/* Give span s (LARGE or SUPERBLOCK, counted out already) back to the shards it covers, its
 * pages tagged with `stream` (NULL: untagged). sh, the shard it starts in, is locked by the
 * caller; the later ones are locked here. */
static void release_span(arena_global *g, arena_shard *sh, arena_span *s, const arena_stream_id *stream)
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
        give_pages(g, ps, p, tag_now(ps, stream));
        p = next;
    }
    give_pages(g, sh, s, tag_now(sh, stream));
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
    const arena_stream_id *stream; /* who takes it (NULL: host memory) */
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

/* Under every lock: each shard once more (home first), then the runs across shards. A fit
 * tagged for another stream is taken after a device synchronization under all the locks (the
 * shards alone had no fit a moment ago: this is the rare path of requests larger than a shard). */
static crmm_status take_across(arena_global *g, unsigned home, const take_request *q, arena_span **out)
{
    lock_all(g);
    crmm_status st = CRMM_ERROR_OUT_OF_MEMORY;
    arena_shard *sh = NULL;
    unsigned k = home;
    bool tagged = false;
    for (unsigned i = 0; i < g->nshards && st == CRMM_ERROR_OUT_OF_MEMORY; i++, k = next_shard(g, k)) {
        sh = &g->shards[k];
        st = take_pages(g, sh, q->npages, q->stream, true, &tagged, out);
    }
    unsigned from, to;
    if (st == CRMM_ERROR_OUT_OF_MEMORY && run_across(g, q->npages, &from, &to)) {
        sh = &g->shards[from];
        st = run_allows(g, from, to, q->stream) ? CRMM_OK : sync_held(g, 0, g->nshards - 1);
        if (st == CRMM_OK)
            st = carve_across(g, from, to, q->npages, out);
    }
    if (st == CRMM_OK)
        claim(g, sh, *out, q);
    unlock_all(g);
    return st;
}

/* Each shard in turn (home first, those whose free pages are too few skipped), one lock at a
 * time. *total: the free pages of all (a hint); *tagged: some shard offered only a fit tagged
 * for another stream (taken, after a synchronization under its lock, when `may_sync`). */
static crmm_status take_shards(arena_global *g, unsigned home, const take_request *q, bool may_sync, bool *tagged,
                               size_t *total, arena_span **out)
{
    size_t n = q->npages;
    unsigned k = home;
    *total = 0;
    for (unsigned i = 0; i < g->nshards; i++, k = next_shard(g, k)) {
        arena_shard *sh = &g->shards[k];
        size_t hint = free_hint(sh);
        *total += hint;
        if (hint < n)
            continue;
        pthread_mutex_lock(&sh->lock);
        crmm_status st = take_pages(g, sh, n, q->stream, may_sync, tagged, out);
        if (st == CRMM_OK)
            claim(g, sh, *out, q);
        pthread_mutex_unlock(&sh->lock);
        if (st != CRMM_ERROR_OUT_OF_MEMORY)
            return st;
    }
    return CRMM_ERROR_OUT_OF_MEMORY;
}

static crmm_status take(arena_global *g, unsigned home, const take_request *q, arena_span **out)
{
    home = home < g->nshards ? home : 0;
    bool tagged = false;
    size_t total;
    crmm_status st = take_shards(g, home, q, false, &tagged, &total, out);
    if (st != CRMM_ERROR_OUT_OF_MEMORY)
        return st;
    if (tagged) { /* only spans tagged for other streams fit: wait for the device once, and again */
        st = arena_global_synchronize(g);
        if (st != CRMM_OK)
            return st;
        __atomic_add_fetch(&g->reuse_syncs, 1, __ATOMIC_RELAXED);
        st = take_shards(g, home, q, true, &tagged, &total, out);
        if (st != CRMM_ERROR_OUT_OF_MEMORY)
            return st;
    }
    if (g->nshards == 1 || total < q->npages)
        return CRMM_ERROR_OUT_OF_MEMORY;
    return take_across(g, home, q, out);
}

/* ---- device synchronization ---------------------------------------------------------------- */

/* Shards from..to are locked by the caller: wait for the device, then void every tag they hold
 * (no free can tag a span of theirs meanwhile). The other shards keep theirs. */
static crmm_status sync_held(arena_global *g, unsigned from, unsigned to)
{
    crmm_status st = g->device_sync(g->device_sync_arg);
    if (st != CRMM_OK)
        return st;
    __atomic_add_fetch(&g->reuse_syncs, 1, __ATOMIC_RELAXED);
    for (unsigned k = from; k <= to; k++) {
        arena_shard *sh = &g->shards[k];
        sh->synced = ++sh->epoch;
    }
    return CRMM_OK;
}

crmm_status arena_global_synchronize(arena_global *g)
{
    if (!g->device_sync)
        return CRMM_OK;
    /* Every tag of an epoch up to mark[k] was made, under the shard's lock, before the epoch moved
     * on here, hence before the synchronization began: the work on its stream is done after it. */
    uint64_t mark[ARENA_MAX_SHARDS];
    for (unsigned k = 0; k < g->nshards; k++) {
        arena_shard *sh = &g->shards[k];
        pthread_mutex_lock(&sh->lock);
        mark[k] = sh->epoch++;
        pthread_mutex_unlock(&sh->lock);
    }
    crmm_status st = g->device_sync(g->device_sync_arg);
    if (st != CRMM_OK)
        return st;
    for (unsigned k = 0; k < g->nshards; k++) {
        arena_shard *sh = &g->shards[k];
        pthread_mutex_lock(&sh->lock);
        if (sh->synced <= mark[k])
            sh->synced = mark[k] + 1;
        pthread_mutex_unlock(&sh->lock);
    }
    return CRMM_OK;
}

void arena_global_use_streams(arena_global *g, crmm_status (*sync)(void *arg), void *arg)
{
    g->device_sync = sync;
    g->device_sync_arg = arg;
}

arena_tag arena_global_span_tag(const arena_global *g, const arena_span *span)
{
    const arena_shard *sh = &g->shards[arena_global_shard_of(g, span->start)];
    return tag_void(sh, span->tag) ? untagged : span->tag;
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
    /* large requests take these locks: spin a little before sleeping (short critical sections) */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    for (unsigned k = 0; k < nshards; k++) {
        arena_shard *sh = &g->shards[k];
        sh->index = k;
        sh->first = (size_t)k * g->shard_pages;
        sh->end = k + 1 == nshards ? g->npages : sh->first + g->shard_pages;
        sh->epoch = sh->synced = 1;
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
        give_pages(g, sh, all, untagged);
    }
    return CRMM_OK;
}

crmm_status arena_global_take_superblock(arena_global *g, unsigned home, arena_slab *slab, unsigned cls,
                                         struct arena_thread *owner, const arena_stream_id *stream)
{
    take_request q = {.npages = g->superblock_pages, .kind = ARENA_SPAN_SUPERBLOCK, .slab = slab, .cls = cls,
                      .owner = owner, .stream = g->device_sync ? stream : NULL};
    arena_span *s;
    return take(g, home, &q, &s);
}

void arena_global_give_superblock(arena_global *g, arena_span *span, bool clean)
{
    arena_shard *sh = &g->shards[arena_global_shard_of(g, span->start)];
    pthread_mutex_lock(&sh->lock);
    sh->superblocks--;
    release_span(g, sh, span, clean || !g->device_sync ? NULL : &mixed_stream);
    pthread_mutex_unlock(&sh->lock);
}

crmm_status arena_global_alloc_large(arena_global *g, unsigned home, size_t bytes, const arena_stream_id *stream,
                                     void **ptr)
{
    take_request q = {.npages = (bytes + g->page_size - 1) >> g->page_shift, .kind = ARENA_SPAN_LARGE, .bytes = bytes,
                      .stream = g->device_sync ? stream : NULL};
    arena_span *s;
    crmm_status st = take(g, home, &q, &s);
    if (st == CRMM_OK)
        *ptr = g->base + (s->start << g->page_shift);
    return st;
}

/* With the lock of the shard of ptr's page taken (*sh, left locked whatever the answer; NULL
 * when ptr is outside the arena): ptr's span when it is a live large block of `bytes`, else NULL
 * (*allocated = its size when only the size differs, else 0). */
static arena_span *lock_large(arena_global *g, void *ptr, size_t bytes, arena_shard **sh, size_t *allocated)
{
    *allocated = 0;
    *sh = NULL;
    uintptr_t off = (uintptr_t)ptr - (uintptr_t)g->base;
    if (off >= g->size)
        return NULL;
    *sh = &g->shards[arena_global_shard_of(g, off >> g->page_shift)];
    pthread_mutex_lock(&(*sh)->lock);
    uintptr_t e = arena_global_entry(g, ptr);
    arena_span *s = arena_entry_span(e);
    if (!(e & ARENA_ENTRY_SPAN) || s->kind != ARENA_SPAN_LARGE || (s->start << g->page_shift) != off)
        return NULL;
    if (s->bytes != bytes) {
        *allocated = s->bytes;
        return NULL;
    }
    return s;
}

crmm_status arena_global_check_large(arena_global *g, void *ptr, size_t bytes, size_t *allocated)
{
    arena_shard *sh;
    arena_span *s = lock_large(g, ptr, bytes, &sh, allocated);
    if (sh)
        pthread_mutex_unlock(&sh->lock);
    return s ? CRMM_OK : CRMM_ERROR_INVALID_ARGUMENT;
}

crmm_status arena_global_free_large(arena_global *g, void *ptr, size_t bytes, const arena_stream_id *stream,
                                    size_t *allocated)
{
    arena_shard *sh;
    arena_span *s = lock_large(g, ptr, bytes, &sh, allocated);
    if (s) {
        sh->large_blocks--;
        release_span(g, sh, s, g->device_sync ? stream : NULL);
    }
    if (sh)
        pthread_mutex_unlock(&sh->lock);
    return s ? CRMM_OK : CRMM_ERROR_INVALID_ARGUMENT;
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
