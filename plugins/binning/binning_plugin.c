/* binning_plugin.c — the `binning` resource (RMM's binning_memory_resource): small requests go
 * to fixed-size bins, large ones straight upstream.
 *
 * The bins are `fixed_size` resources over the same upstream, one per size: every power of two
 * from 2^min_size_exponent to 2^max_size_exponent, and/or the sizes listed in `bins`; sizes are
 * rounded up to 256 and kept sorted in an array. A request goes to the smallest bin whose size
 * is at least the request, or upstream when none is: a table indexed by the request's power of
 * two gives the first candidate, and only bins of the same octave are stepped over (none when
 * the bins are powers of two), so routing is O(1). A free finds its bin the same way from its
 * size (the ABI passes the allocated size back), as RMM does. Only the blocks sent upstream
 * are remembered, so that a free with a wrong size (a bin's block freed as a large one) is
 * refused instead of freeing part of a bin's chunk upstream; a bin refuses a block it did not
 * hand out.
 *
 * The hot path touches nothing shared but the bin's own lock: the bins count their own blocks,
 * and only requests passed upstream are counted here (atomics, on that path alone). So the
 * counts in use and in total are the bins' sums plus those; the peaks are not known (a sum of
 * the bins' peaks would overstate them) and are not answered: a `statistics` layer above gives
 * them.
 *
 * CRMM_BINNING_OP_ADD_BIN (crmm/binning.h) inserts a bin later, RMM's add_bin: a resource the
 * caller gives (retained until destroy) or a new fixed_size one; the array and the route table
 * are rebuilt without a lock, so it must not run while other threads use the resource. A new bin
 * takes over some sizes from the next larger bin or from the upstream, and every free must still
 * reach the resource that made its block: blocks passed upstream are known one by one (late_bins
 * sends their frees back upstream), a bin's are not, so a bin that would take sizes from a bin
 * with blocks live is refused. */
#include "build_config.h"
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/alloc_counters.h>
#include <crmm/binning.h>
#include <crmm/config.h>
#include <crmm/plugin.h>
#include "../common/fork_guards.h"
#include "../common/plugin_descriptor.h"
#include "../common/ptr_set.h"

typedef struct binning_bin {
    size_t size;          /* block size of the bin, a multiple of 256 */
    crmm_resource *mr;    /* a fixed_size resource */
} binning_bin;

typedef struct binning_resource {
    crmm_resource base;
    binning_bin *bins;    /* sorted by size, distinct sizes */
    size_t bin_count;
    uint64_t blocks_to_preallocate; /* of each fixed_size bin, add_bin's included */
    uint32_t first_bin[64]; /* [h]: the first bin of at least 2^h bytes (bin_count when none) */
    crmm_alloc_counters large; /* requests passed upstream (atomic) */
    pthread_mutex_t large_lock;
    ptr_set live_large; /* the blocks passed upstream and not freed (under large_lock) */
    bool late_bins;       /* a bin was added while blocks passed upstream were live: a free of
                           * one of them may now route to a bin (atomic; cleared under large_lock
                           * when live_large empties) */
    crmm_fork_guard fork_guard; /* large_lock around fork() (the bins have their own) */
    char *plugin_path;    /* the plugin search path it was built with (crmm_params_plugin_path), or NULL */
} binning_resource;

/* The resource serving `bytes`: the smallest bin that fits, else the upstream. A request of
 * bytes > 2^h starts at the first bin of at least 2^h bytes; every bin before it is too small. */
static inline crmm_resource *route(const binning_resource *b, size_t bytes)
{
    size_t i = bytes > 1 ? b->first_bin[63 - __builtin_clzll((unsigned long long)bytes - 1)] : 0;
    while (i < b->bin_count && b->bins[i].size < bytes)
        i++;
    return i < b->bin_count ? b->bins[i].mr : b->base.upstream;
}

static void fill_route_table(binning_resource *b)
{
    size_t i = 0;
    for (unsigned h = 0; h < 64; h++) {
        while (i < b->bin_count && b->bins[i].size < ((uint64_t)1 << h))
            i++;
        b->first_bin[h] = (uint32_t)i;
    }
}

static crmm_status binning_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    binning_resource *b = (binning_resource *)self;
    crmm_resource *target = route(b, bytes);
    crmm_status st = crmm_resource_allocate(target, bytes, stream, ptr);
    if (st != CRMM_OK || target != self->upstream)
        return st;
    pthread_mutex_lock(&b->large_lock);
    bool added = ptr_set_add(&b->live_large, (uintptr_t)*ptr);
    pthread_mutex_unlock(&b->large_lock);
    if (!added) {
        crmm_resource_deallocate(target, *ptr, bytes, stream);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "binning '%s': malloc failed (table of large blocks)", self->name);
    }
    crmm_counters_add(&b->large, bytes, CRMM_COUNT_SHARED);
    return CRMM_OK;
}

/* Whether ptr is a block passed upstream before a bin of its size was added (it goes back
 * upstream, not to that bin). */
static bool passed_up_before_its_bin(binning_resource *b, void *ptr)
{
    if (!__atomic_load_n(&b->late_bins, __ATOMIC_RELAXED))
        return false;
    pthread_mutex_lock(&b->large_lock);
    bool up = ptr_map_find(&b->live_large.map, (uintptr_t)ptr) != NULL;
    pthread_mutex_unlock(&b->large_lock);
    return up;
}

static crmm_status binning_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    binning_resource *b = (binning_resource *)self;
    crmm_resource *target = route(b, bytes);
    bool up_before_its_bin = target != self->upstream && passed_up_before_its_bin(b, ptr);
    if (up_before_its_bin)
        target = self->upstream;
    if (target == self->upstream) {
        pthread_mutex_lock(&b->large_lock);
        bool known = ptr_set_remove(&b->live_large, (uintptr_t)ptr);
        if (known && !b->live_large.map.count)
            __atomic_store_n(&b->late_bins, false, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&b->large_lock);
        if (!known)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                                  "binning '%s': free of %p as %zu bytes: not a block it passed upstream (wrong size, or freed twice?)",
                                  self->name, ptr, bytes);
    }
    crmm_status st = crmm_resource_deallocate(target, ptr, bytes, stream);
    if (target != self->upstream)
        return st;
    if (st != CRMM_OK) { /* refused upstream: still live (and its next free still routed up) */
        pthread_mutex_lock(&b->large_lock);
        (void)ptr_set_add(&b->live_large, (uintptr_t)ptr);
        if (up_before_its_bin)
            __atomic_store_n(&b->late_bins, true, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&b->large_lock);
        return st;
    }
    crmm_counters_sub(&b->large, bytes, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
    return CRMM_OK;
}

/* Whether bin i's resource is counted in sum_bins: not the upstream given as a bin (RMM's own
 * test adds it; its blocks go through the upstream path and are counted in `large`), and a
 * resource given for several bins only once. */
static bool bin_counted(const binning_resource *b, size_t i)
{
    if (b->bins[i].mr == b->base.upstream)
        return false;
    for (size_t j = 0; j < i; j++)
        if (b->bins[j].mr == b->bins[i].mr)
            return false;
    return true;
}

/* Sum (or, for the largest free block, the maximum) of `what` over the bins. */
static crmm_status sum_bins(const binning_resource *b, crmm_query what, uint64_t *out)
{
    uint64_t total = 0;
    for (size_t i = 0; i < b->bin_count; i++) {
        if (!bin_counted(b, i))
            continue;
        uint64_t v;
        crmm_status st = crmm_resource_query(b->bins[i].mr, what, &v);
        if (st != CRMM_OK)
            return st;
        if (what == CRMM_QUERY_LARGEST_FREE_BLOCK)
            total = v > total ? v : total;
        else
            total += v;
    }
    *out = total;
    return CRMM_OK;
}

static crmm_status binning_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    binning_resource *b = (binning_resource *)self;
    uint64_t bins, large;
    crmm_status st;
    switch (what) {
    case CRMM_QUERY_BYTES_IN_USE:       /* the bins' blocks and the large blocks */
    case CRMM_QUERY_ALLOCATIONS:
    case CRMM_QUERY_ALLOCATIONS_TOTAL:
    case CRMM_QUERY_BYTES_TOTAL:
        if ((st = sum_bins(b, what, &bins)) == CRMM_OK && (st = crmm_counters_query(&b->large, what, &large)) == CRMM_OK)
            *out = bins + large;
        return st;
    case CRMM_QUERY_BYTES_IN_USE_PEAK:
    case CRMM_QUERY_ALLOCATIONS_PEAK:
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "binning resource does not track peaks (a statistics layer over it does)");
    case CRMM_QUERY_BYTES_RESERVED:     /* the bins' chunks and the large blocks */
        if ((st = sum_bins(b, what, &bins)) == CRMM_OK)
            *out = bins + (uint64_t)__atomic_load_n(&b->large.bytes, __ATOMIC_RELAXED);
        return st;
    case CRMM_QUERY_UPSTREAM_BLOCKS:
        if ((st = sum_bins(b, what, &bins)) == CRMM_OK)
            *out = bins + (uint64_t)__atomic_load_n(&b->large.count, __ATOMIC_RELAXED);
        return st;
    case CRMM_QUERY_BYTES_FREE:
    case CRMM_QUERY_LARGEST_FREE_BLOCK:
        return sum_bins(b, what, out);
    case CRMM_QUERY_MAXIMUM_SIZE:
        return crmm_resource_query_upstream(self, what, out);
    default:
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "binning resource cannot answer query %d", (int)what);
    }
}

/* Each bin that keeps memory of its own to give back (a pool given to add_bin), once, then the
 * upstream. A fixed_size bin over the upstream gives nothing back itself (its chunks stay until
 * destroy, as RMM's) and its trim would only reach the upstream again. The first failure is
 * returned; the rest are still trimmed. */
static crmm_status binning_trim(crmm_resource *self)
{
    binning_resource *b = (binning_resource *)self;
    crmm_status first = CRMM_OK;
    for (size_t i = 0; i < b->bin_count; i++) {
        crmm_resource *mr = b->bins[i].mr;
        if (!bin_counted(b, i) || (!mr->ops->trim && mr->upstream == self->upstream))
            continue;
        crmm_status st = crmm_resource_trim(mr);
        if (st != CRMM_OK && first == CRMM_OK)
            first = crmm_error_add_context("binning '%s': trim of the bin of %zu bytes", self->name, b->bins[i].size);
    }
    crmm_status st = crmm_resource_trim(self->upstream);
    return first != CRMM_OK ? first : st;
}

static void release_bins(binning_resource *b)
{
    for (size_t i = 0; i < b->bin_count; i++)
        crmm_resource_release(b->bins[i].mr);
    free(b->bins);
    b->bins = NULL;
    b->bin_count = 0;
}

static void binning_destroy(crmm_resource *self)
{
    binning_resource *b = (binning_resource *)self;
    crmm_fork_guard_remove(&b->fork_guard);
    uint64_t count = 0, bytes = 0;
    if (sum_bins(b, CRMM_QUERY_ALLOCATIONS, &count) == CRMM_OK && sum_bins(b, CRMM_QUERY_BYTES_IN_USE, &bytes) == CRMM_OK)
        crmm_resource_report_leaks(self, count + (uint64_t)b->large.count, bytes + (uint64_t)b->large.bytes);
    release_bins(b);
    ptr_set_free(&b->live_large);
    pthread_mutex_destroy(&b->large_lock);
    free(b->plugin_path);
    free(b);
}

static const crmm_resource_ops binning_ops;

/* Whether a request to `from` may reach `target`: from is target, or one of its upstreams is, or
 * (for a binning) one of its bins does. Chains are short; the depth only bounds a chain that is
 * already broken. */
static bool reaches(const crmm_resource *from, const crmm_resource *target, int depth)
{
    for (const crmm_resource *m = from; m && depth < 64; m = m->upstream, depth++) {
        if (m == target)
            return true;
        if (m->ops == &binning_ops) {
            const binning_resource *other = (const binning_resource *)m;
            for (size_t i = 0; i < other->bin_count; i++)
                if (reaches(other->bins[i].mr, target, depth + 1))
                    return true;
        }
    }
    return false;
}

/* Whether a bin inserted at `at` with block size `size` may be added: it takes over the sizes
 * above the bin before it, up to `size`, from the bin now at `at` (or from the upstream when `at`
 * is the end or that bin is the upstream itself, whose live blocks live_large knows: late_bins
 * covers them). A free finds its
 * resource by size, and which of that bin's live blocks were asked for with the sizes that move
 * only the bin itself could say (it keeps no request sizes; recording every bin block here would
 * cost the hot path), so the bin is added only while the bin that loses those sizes has no block
 * live. Its own count answers that; a bin that cannot answer is taken to have blocks live. */
static crmm_status sizes_may_move(const binning_resource *b, size_t at, size_t size)
{
    if (at == b->bin_count || b->bins[at].mr == b->base.upstream) /* its blocks: in live_large */
        return CRMM_OK;
    const binning_bin *from = &b->bins[at];
    uint64_t live = 0;
    crmm_status st = crmm_resource_query(from->mr, CRMM_QUERY_ALLOCATIONS, &live);
    if (st == CRMM_OK && live == 0)
        return CRMM_OK;
    char why[192];
    if (st == CRMM_OK)
        snprintf(why, sizeof why, "has %llu block%s live", (unsigned long long)live, live == 1 ? "" : "s");
    else
        snprintf(why, sizeof why, "cannot say whether it has blocks live (%s)", crmm_last_error());
    return crmm_set_error(CRMM_ERROR_STATE,
                          "binning '%s': add_bin of %zu bytes: the requests of %zu to %zu bytes would move from the bin of "
                          "%zu bytes, which %s: their frees would go to the new bin; add the bin before allocating "
                          "from that one, or once its blocks are freed",
                          b->base.name, size, at ? b->bins[at - 1].size + 1 : (size_t)1, size, from->size, why);
}

/* CRMM_BINNING_OP_ADD_BIN: insert a bin, keeping the array sorted, and rebuild the route
 * table. Not synchronized with allocate/deallocate (as RMM's add_bin): see crmm/binning.h. */
static crmm_status add_bin(binning_resource *b, crmm_binning_bin *arg)
{
    if (!arg)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "binning '%s': add_bin: no argument", b->base.name);
    if (arg->size == 0 || arg->size > ((uint64_t)1 << 63))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "binning '%s': add_bin: a bin of %llu bytes (1 .. 2^63 allowed)",
                              b->base.name, (unsigned long long)arg->size);
    /* A bin may serve less than the binning promised (RMM puts a cuda bin under a binning of
     * managed memory): the binning then promises what both give. A bin with nothing in common
     * (host-only memory under a device binning), or on another device, is refused. */
    unsigned common = arg->mr ? (arg->mr->flags & b->base.flags & (CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE)) : 1u;
    if (arg->mr && reaches(arg->mr, &b->base, 0))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "binning '%s': add_bin: the bin resource is the binning itself or calls into it",
                              b->base.name);
    if (arg->mr && (common == 0 || arg->mr->device != b->base.device))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "binning '%s': add_bin: bin resource '%s' (%s memory, device %d) cannot serve a binning of %s memory on device %d",
                              b->base.name, arg->mr->kind, (arg->mr->flags & CRMM_RESOURCE_DEVICE_ACCESSIBLE) ? "device" : "host-only",
                              arg->mr->device, (b->base.flags & CRMM_RESOURCE_DEVICE_ACCESSIBLE) ? "device" : "host-only", b->base.device);
    size_t size = (size_t)((arg->size + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(uint64_t)(CRMM_ALLOCATION_ALIGNMENT - 1));
    size_t at = 0;
    while (at < b->bin_count && b->bins[at].size < size)
        at++;
    arg->added = 0;
    if (at < b->bin_count && b->bins[at].size == size)
        return CRMM_OK; /* RMM keeps the bin a size already has */
    crmm_status moves = sizes_may_move(b, at, size);
    if (moves != CRMM_OK)
        return moves;
    binning_bin *bins = realloc(b->bins, (b->bin_count + 1) * sizeof *bins);
    if (!bins)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "binning '%s': add_bin: malloc failed", b->base.name);
    b->bins = bins;
    crmm_resource *mr = arg->mr;
    if (mr) {
        crmm_resource_retain(mr);
        b->base.flags = (b->base.flags & ~(CRMM_RESOURCE_DEVICE_ACCESSIBLE | CRMM_RESOURCE_HOST_ACCESSIBLE)) | common;
    } else {
        char list[128];
        snprintf(list, sizeof list, "block_size=%zu blocks_to_preallocate=%llu", size, (unsigned long long)b->blocks_to_preallocate);
        /* found as create's bins are: in the plugin path binning was built with */
        crmm_status st = crmm_plugin_path_create_resource(b->plugin_path, b->base.device, "fixed_size", list, NULL,
                                                          b->base.upstream, &mr);
        if (st != CRMM_OK)
            return crmm_error_add_context("binning '%s': add_bin of %zu bytes", b->base.name, size);
    }
    memmove(&b->bins[at + 1], &b->bins[at], (b->bin_count - at) * sizeof *b->bins);
    b->bins[at] = (binning_bin){size, mr};
    b->bin_count++;
    fill_route_table(b);
    pthread_mutex_lock(&b->large_lock);
    if (b->live_large.map.count) /* their frees may route to the new bin now */
        __atomic_store_n(&b->late_bins, true, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&b->large_lock);
    arg->added = 1;
    return CRMM_OK;
}

static crmm_status binning_control(crmm_resource *self, int op, void *arg)
{
    binning_resource *b = (binning_resource *)self;
    switch (op) {
    case CRMM_BINNING_OP_ADD_BIN:
        return add_bin(b, arg);
    case CRMM_BINNING_OP_BIN_COUNT:
        if (!arg)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "binning '%s': bin count: no argument", self->name);
        *(uint64_t *)arg = b->bin_count;
        return CRMM_OK;
    case CRMM_BINNING_OP_GET_BIN: {
        crmm_binning_bin *bin = arg;
        if (!bin || bin->size >= b->bin_count)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "binning '%s': no bin %llu (%zu bins)", self->name,
                                  bin ? (unsigned long long)bin->size : 0ULL, b->bin_count);
        size_t i = (size_t)bin->size;
        bin->size = b->bins[i].size;
        bin->mr = b->bins[i].mr;
        return CRMM_OK;
    }
    default:
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "binning resource has no control op %d", op);
    }
}

static const crmm_resource_ops binning_ops = {
    .allocate = binning_allocate, .deallocate = binning_deallocate, .query = binning_query,
    .trim = binning_trim, .destroy = binning_destroy, .control = binning_control,
};

/* ---- create: collect the sizes, then one fixed_size resource per size ---------------------- */

typedef struct size_list { uint64_t *v; size_t n, cap; } size_list;

static crmm_status size_list_add(size_list *l, uint64_t size)
{
    if (size > UINT64_MAX - (CRMM_ALLOCATION_ALIGNMENT - 1))
        return crmm_set_error(CRMM_ERROR_CONFIG, "binning: bin size %llu is too large", (unsigned long long)size);
    size = (size + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(uint64_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == size)
            return CRMM_OK; /* as RMM's add_bin: a size already binned is not added twice */
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        uint64_t *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "binning: malloc failed");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = size;
    return CRMM_OK;
}

static int by_size(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The parameters, as crmm_params_parse fills them from binning_params. */
typedef struct binning_config {
    uint64_t min_size_exponent;
    uint64_t max_size_exponent;
    const char *bins;
    uint64_t blocks_to_preallocate;
} binning_config;

/* Sizes from the exponent range. */
static crmm_status add_exponents(const crmm_params *params, size_list *sizes)
{
    bool has_min = crmm_params_is_set(params, "min_size_exponent");
    bool has_max = crmm_params_is_set(params, "max_size_exponent");
    if (!has_min && !has_max)
        return CRMM_OK;
    if (has_min != has_max)
        return crmm_set_error(CRMM_ERROR_CONFIG, "binning: %s is given without %s", has_min ? "min_size_exponent" : "max_size_exponent",
                              has_min ? "max_size_exponent" : "min_size_exponent");
    uint64_t lo = 0, hi = 0;
    crmm_params_get_uint(params, "min_size_exponent", &lo);
    crmm_params_get_uint(params, "max_size_exponent", &hi);
    if (hi > 63)
        return crmm_set_error(CRMM_ERROR_CONFIG, "binning: max_size_exponent %llu is above 63", (unsigned long long)hi);
    if (lo > hi)
        return crmm_set_error(CRMM_ERROR_CONFIG, "binning: min_size_exponent %llu is above max_size_exponent %llu",
                              (unsigned long long)lo, (unsigned long long)hi);
    for (uint64_t e = lo; e <= hi; e++) {
        crmm_status st = size_list_add(sizes, (uint64_t)1 << e);
        if (st != CRMM_OK)
            return st;
    }
    return CRMM_OK;
}

/* Sizes from `bins`: "256,4KiB,64KiB" (',' or ':' between sizes; ':' where ',' separates
 * parameters, as in crmm_resource_create strings). */
static crmm_status add_listed(const crmm_params *params, size_list *sizes)
{
    const char *text = NULL;
    if (crmm_params_get_string(params, "bins", &text) != CRMM_OK || !text)
        return CRMM_OK;
    char *copy = strdup(text);
    if (!copy)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "binning: malloc failed");
    crmm_status st = CRMM_OK;
    size_t listed = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",:", &save); tok && st == CRMM_OK; tok = strtok_r(NULL, ",:", &save)) {
        uint64_t size;
        if (crmm_parse_size(tok, 0, &size, NULL) != CRMM_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", crmm_last_error());
            st = crmm_set_error(CRMM_ERROR_CONFIG, "binning: bins: '%s' is not a size (%s)", tok, why);
        } else if (size == 0)
            st = crmm_set_error(CRMM_ERROR_CONFIG, "binning: bins: a bin of 0 bytes");
        else
            st = size_list_add(sizes, size);
        listed++;
    }
    free(copy);
    if (st == CRMM_OK && listed == 0)
        st = crmm_set_error(CRMM_ERROR_CONFIG, "binning: bins = '%s' lists no size", text);
    return st;
}

/* Whether a bin's chunk, `blocks` blocks of `size` rounded up to the allocation alignment, is
 * addressable: the rule fixed_size's create applies to each bin, checked here so that check-config
 * refuses what the build would. */
static crmm_status bin_chunk_fits(uint64_t size, uint64_t blocks)
{
    uint64_t align = CRMM_ALLOCATION_ALIGNMENT;
    if (size > SIZE_MAX - (align - 1) || blocks > SIZE_MAX / ((size + align - 1) & ~(align - 1))) {
        char sz[32];
        return crmm_set_error(CRMM_ERROR_CONFIG, "binning: bin of %s: %llu blocks of it do not fit in memory",
                              crmm_format_size(size, sz, sizeof sz), (unsigned long long)blocks);
    }
    return CRMM_OK;
}

/* crmm_plugin.validate: the bin sizes are read as create reads them, blaming the parameter; each
 * bin's preallocated chunk must be addressable. */
static crmm_status binning_validate(const crmm_params *params, bool host_memory, const char **key)
{
    (void)host_memory;
    size_list sizes = {0};
    uint64_t blocks = 0;
    crmm_status st = add_exponents(params, &sizes);
    if (st != CRMM_OK)
        *key = crmm_params_is_set(params, "max_size_exponent") ? "max_size_exponent" : "min_size_exponent";
    else if ((st = add_listed(params, &sizes)) != CRMM_OK)
        *key = "bins";
    else if (crmm_params_get_uint(params, "blocks_to_preallocate", &blocks) == CRMM_OK)
        for (size_t i = 0; i < sizes.n && st == CRMM_OK; i++)
            if ((st = bin_chunk_fits(sizes.v[i], blocks)) != CRMM_OK)
                *key = "blocks_to_preallocate";
    free(sizes.v);
    return st;
}

static crmm_status make_bins(binning_resource *b, const size_list *sizes, uint64_t blocks, const crmm_params *params)
{
    b->bins = calloc(sizes->n ? sizes->n : 1, sizeof *b->bins);
    if (!b->bins)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "binning: malloc failed");
    for (size_t i = 0; i < sizes->n; i++) {
        char list[128];
        snprintf(list, sizeof list, "block_size=%llu blocks_to_preallocate=%llu", (unsigned long long)sizes->v[i],
                 (unsigned long long)blocks);
        const char *name = crmm_params_resource_name(params);
        char bin_name[48];
        snprintf(bin_name, sizeof bin_name, "%s%sbin%llu", name, *name ? "." : "", (unsigned long long)sizes->v[i]);
        crmm_resource *bin;
        crmm_status st = crmm_params_create_resource(params, "fixed_size", list, bin_name, b->base.upstream, &bin);
        if (st != CRMM_OK) {
            char sz[32];
            return crmm_error_add_context("binning: bin of %s", crmm_format_size(sizes->v[i], sz, sizeof sz));
        }
        b->bins[b->bin_count++] = (binning_bin){(size_t)sizes->v[i], bin};
    }
    fill_route_table(b);
    return CRMM_OK;
}

static crmm_status binning_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    size_list sizes = {0};
    crmm_status st = add_exponents(params, &sizes);
    if (st == CRMM_OK)
        st = add_listed(params, &sizes);
    binning_config cfg = {0};
    if (st == CRMM_OK)
        st = crmm_params_parse(params, &cfg);
    uint64_t blocks = cfg.blocks_to_preallocate;
    binning_resource *b = NULL;
    if (st == CRMM_OK && !(b = calloc(1, sizeof *b)))
        st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "binning: malloc failed");
    if (st != CRMM_OK) {
        free(sizes.v);
        return st;
    }
    if (sizes.n > 1)
        qsort(sizes.v, sizes.n, sizeof *sizes.v, by_size);
    crmm_resource_init(&b->base, &binning_ops, "binning", upstream->flags, upstream->device, upstream);
    pthread_mutex_init(&b->large_lock, NULL);
    b->blocks_to_preallocate = blocks;
    const char *plugin_path = crmm_params_plugin_path(params);
    if (plugin_path && !(b->plugin_path = strdup(plugin_path)))
        st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "binning: malloc failed");
    else
        st = make_bins(b, &sizes, blocks, params);
    free(sizes.v);
    if (st != CRMM_OK) {
        free(b->plugin_path);
        release_bins(b);
        pthread_mutex_destroy(&b->large_lock);
        free(b);
        crmm_resource_release(upstream); /* the reference crmm_resource_init took */
        return st;
    }
    fork_guard_add_mutex(&b->fork_guard, &b->large_lock);
    *out = &b->base;
    return CRMM_OK;
}

/* Exponents of sizes that fit in 64 bits; blocks per chunk as fixed_size takes them. */
static const crmm_param binning_params[] = {
    {.key = "min_size_exponent", .type = CRMM_PARAM_UINT,
     .help = "smallest bin is 2^this bytes (with max_size_exponent)",
     .offset = offsetof(binning_config, min_size_exponent), .max = 63},
    {.key = "max_size_exponent", .type = CRMM_PARAM_UINT,
     .help = "largest bin is 2^this bytes; larger requests go upstream",
     .offset = offsetof(binning_config, max_size_exponent), .max = 63},
    {.key = "bins", .type = CRMM_PARAM_STRING,
     .help = "explicit bin sizes, e.g. 256,4KiB,64KiB (':' also separates)",
     .offset = offsetof(binning_config, bins)},
    {.key = "blocks_to_preallocate", .type = CRMM_PARAM_UINT, .default_value = "128",
     .help = "blocks per upstream allocation of each bin",
     .offset = offsetof(binning_config, blocks_to_preallocate), .min = 1, .max = (uint64_t)1 << 20},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "binning", .upstream = CRMM_UPSTREAM_REQUIRED, .params = binning_params,
                  .config_size = sizeof(binning_config), .validate = binning_validate,
                  .create = binning_create,
                  .description = "fixed_size bins for small requests, upstream for the rest (RMM binning_memory_resource); refuses a free its size sends to a bin or upstream that did not hand it out; a wrong size within one bin frees the block (counters stop at 0)")
