/* arena_dump.c — the arena's state for people: how much is free and where, and the dump file
 * written when an allocation fails (dump_log_on_failure) or on request (CRMM_ARENA_DUMP).
 *
 * Both walk the global arena's spans in address order under its locks (every shard's): a free
 * span counts whole, a superblock counts its free blocks. Superblocks that threads hold change
 * while we look, so the numbers for those are a snapshot, exact once the threads are quiet. The
 * dump has one line per shard, then one per span (a free span of device memory says which stream
 * freed it while another stream would have to wait for the device to take it). */
#include "build_config.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "arena_thread_cache.h"

typedef struct span_census {
    size_t superblocks, large, free_spans;
} span_census;

/* The slab of a superblock span while it is in use (NULL in the moment it is being stolen). */
static const arena_slab *span_slab(const arena_span *s)
{
    const arena_slab *sb = s->slab;
    if (!sb || sb->span != s)
        return NULL;
    int st = arena_slab_state(sb);
    return st == ARENA_SLAB_OWNED || st == ARENA_SLAB_EMPTY || st == ARENA_SLAB_DETACHED ? sb : NULL;
}

static void census_visit(const arena_span *s, void *arg)
{
    span_census *u = arg;
    if (s->kind == ARENA_SPAN_FREE)
        u->free_spans++;
    else if (s->kind == ARENA_SPAN_SUPERBLOCK)
        u->superblocks++;
    else
        u->large++;
}

typedef struct slab_usage {
    size_t free_bytes, largest_block;
} slab_usage;

static void slab_visit(const arena_span *s, void *arg)
{
    slab_usage *u = arg;
    const arena_slab *sb = s->kind == ARENA_SPAN_SUPERBLOCK ? span_slab(s) : NULL;
    if (!sb)
        return;
    uint32_t n = arena_slab_free_count(sb);
    u->free_bytes += (size_t)n * sb->block_size;
    if (n && sb->block_size > u->largest_block)
        u->largest_block = sb->block_size;
}

void arena_usage(arena_resource *r, size_t *free_bytes, size_t *largest_free)
{
    size_t global_free, global_largest;
    arena_global_usage(&r->global, &global_free, &global_largest);
    slab_usage u = {0, 0};
    arena_global_walk(&r->global, slab_visit, &u);
    *free_bytes = global_free + u.free_bytes;
    *largest_free = global_largest > u.largest_block ? global_largest : u.largest_block;
}

typedef struct dump_walk {
    FILE *f;
    const arena_global *g;
    size_t index;
} dump_walk;

static const char *slab_state_name(const arena_slab *sb)
{
    switch (arena_slab_state(sb)) {
    case ARENA_SLAB_OWNED: return "held";
    case ARENA_SLAB_EMPTY: return "held-empty";
    case ARENA_SLAB_DETACHED: return "detached";
    default: return "moving";
    }
}

static void dump_visit(const arena_span *s, void *arg)
{
    dump_walk *d = arg;
    char *start = d->g->base + (s->start << d->g->page_shift);
    size_t bytes = s->npages << d->g->page_shift;
    char sz[32], more[32];
    crmm_format_size(bytes, sz, sizeof sz);
    if (s->kind == ARENA_SPAN_SUPERBLOCK) {
        const arena_slab *sb = span_slab(s);
        if (sb)
            fprintf(d->f, "  superblock %zu: start=%p, end=%p, size=%s, class=%s, blocks=%u, free=%u, state=%s\n",
                    d->index, (void *)start, (void *)(start + bytes), sz,
                    crmm_format_size(sb->block_size, more, sizeof more), sb->capacity, arena_slab_free_count(sb),
                    slab_state_name(sb));
        else
            fprintf(d->f, "  superblock %zu: start=%p, end=%p, size=%s, state=moving\n", d->index, (void *)start,
                    (void *)(start + bytes), sz);
    } else if (s->kind == ARENA_SPAN_LARGE) {
        fprintf(d->f, "  large %zu: start=%p, end=%p, size=%s, requested=%s\n", d->index, (void *)start,
                (void *)(start + bytes), sz, crmm_format_size(s->bytes, more, sizeof more));
    } else {
        /* a tag that is still live: another stream must wait for the device to take it */
        arena_tag t = arena_global_span_tag(d->g, s);
        char tag[64] = "";
        if (t.epoch && t.stream.thread == ARENA_STREAM_MIXED)
            snprintf(tag, sizeof tag, ", freed on several streams");
        else if (t.epoch && t.stream.thread)
            snprintf(tag, sizeof tag, ", freed on the per-thread stream of thread %llu",
                     (unsigned long long)t.stream.thread);
        else if (t.epoch)
            snprintf(tag, sizeof tag, ", freed on stream %p", (void *)t.stream.handle);
        fprintf(d->f, "  free %zu: start=%p, end=%p, size=%s%s\n", d->index, (void *)start, (void *)(start + bytes), sz,
                tag);
    }
    d->index++;
}

crmm_status arena_dump_write(arena_resource *r, const char *path, size_t bytes)
{
    char file[4096];
    if (crmm_expand_file_name(path ? path : r->dump_file, r->base.device, file, sizeof file) != CRMM_OK)
        return crmm_error_add_context("%s: dump file", arena_who(r));
    int fd;
    if (crmm_output_file_open(file, CRMM_OUTPUT_APPEND, &fd) != CRMM_OK)
        return crmm_error_add_context("%s: dump file", arena_who(r));
    FILE *f = fdopen(fd, "a");
    if (!f) {
        int err = errno;
        close(fd);
        return crmm_set_error(CRMM_ERROR_IO, "%s: cannot open the dump file %s: %s", arena_who(r), file, strerror(err));
    }

    arena_counts counts;
    arena_cache_counts(r, &counts);
    size_t free_bytes, largest;
    arena_usage(r, &free_bytes, &largest);
    span_census u = {0, 0, 0};
    arena_global_walk(&r->global, census_visit, &u);
    size_t thread_arenas, held;
    arena_cache_holdings(r, &thread_arenas, &held);
    size_t detached = 0;
    for (unsigned c = 0; c < r->nclasses; c++) {
        pthread_mutex_lock(&r->classes[c].lock);
        detached += r->classes[c].detached;
        pthread_mutex_unlock(&r->classes[c].lock);
    }
    double fragmentation = free_bytes ? 100.0 * (1.0 - (double)largest / (double)free_bytes) : 0.0;

    char a[32], b[32], c[32];
    fprintf(f, "**************************************************\n");
    if (bytes)
        fprintf(f, "%s ran out of memory trying to allocate %s (%zu bytes)\n", arena_who(r),
                crmm_format_size(bytes, a, sizeof a), bytes);
    else
        fprintf(f, "%s state on request\n", arena_who(r));
    fprintf(f, "**************************************************\n");
    fprintf(f, "  device: %d, process: %ld\n", r->base.device, (long)getpid());
    fprintf(f, "  arena size: %s (%zu bytes)\n", crmm_format_size(r->arena_size, a, sizeof a), r->arena_size);
    fprintf(f, "  superblock size: %s, page size: %s, small blocks up to %s\n",
            crmm_format_size(r->superblock_size, a, sizeof a), crmm_format_size(r->global.page_size, b, sizeof b),
            crmm_format_size(r->small_max, c, sizeof c));
    fprintf(f, "  bytes in use: %s (%lld bytes) in %lld allocations\n", crmm_format_size((uint64_t)counts.bytes, a, sizeof a),
            (long long)counts.bytes, (long long)counts.count);
    fprintf(f, "  free bytes: %s (%zu bytes)\n", crmm_format_size(free_bytes, a, sizeof a), free_bytes);
    fprintf(f, "  largest free block: %s (%zu bytes)\n", crmm_format_size(largest, a, sizeof a), largest);
    fprintf(f, "  fragmentation: %.2f%%\n", fragmentation);
    fprintf(f, "  thread arenas: %zu, holding %zu superblocks; detached superblocks: %zu\n", thread_arenas, held,
            detached);
    fprintf(f, "  superblocks: %zu, large blocks: %zu, free spans: %zu\n", u.superblocks, u.large, u.free_spans);
    fprintf(f, "  shards: %u\n", r->shards);
    if (r->uses_cuda)
        fprintf(f, "  device synchronizations to reuse memory freed on another stream: %llu\n",
                (unsigned long long)__atomic_load_n(&r->global.reuse_syncs, __ATOMIC_RELAXED));
    for (unsigned k = 0; k < r->shards; k++) {
        arena_shard_usage su;
        arena_global_shard_usage(&r->global, k, &su);
        char large[32];
        fprintf(f, "  shard %u: start=%p, end=%p, size=%s, free=%s, largest free=%s, superblocks=%zu, large blocks=%zu "
                "(%s), home of %zu thread arenas\n",
                k, (void *)(r->global.base + su.offset), (void *)(r->global.base + su.offset + su.size),
                crmm_format_size(su.size, a, sizeof a), crmm_format_size(su.free_bytes, b, sizeof b),
                crmm_format_size(su.largest_free, c, sizeof c), su.superblocks, su.large_blocks,
                crmm_format_size(su.large_bytes, large, sizeof large), arena_cache_homed(r, k));
    }
    dump_walk d = {f, &r->global, 0};
    arena_global_walk(&r->global, dump_visit, &d);
    int failed = ferror(f);
    if (fclose(f) != 0 || failed)
        return crmm_set_error(CRMM_ERROR_IO, "%s: cannot write the dump file %s", arena_who(r), file);
    return CRMM_OK;
}
