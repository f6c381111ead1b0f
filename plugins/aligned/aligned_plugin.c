/* aligned_plugin.c — the `aligned` adaptor: blocks aligned to more than 256 bytes (RMM's
 * aligned_resource_adaptor), e.g. 4 KiB for GPUDirect Storage.
 *
 * A request of at least `alignment_threshold` bytes takes align_up(bytes, alignment) +
 * alignment - 256 bytes from upstream (room to move a 256-aligned pointer up to the next
 * multiple of `alignment`) and returns the aligned pointer; when that differs from the upstream
 * pointer, the pair is kept in a sharded hash map (support/ptr_map.h) until the free. Smaller
 * requests, and every request when the alignment is 256, pass through untouched. */
#include "build_config.h"
#include <stddef.h>
#include <stdlib.h>
#include <crmm/alloc_counters.h>
#include <crmm/plugin.h>
#include "../common/adaptor.h"
#include "../common/plugin_descriptor.h"
#include "ptr_map.h"

typedef struct aligned_resource {
    crmm_resource base;
    size_t alignment;          /* a power of two >= 256 */
    size_t threshold;          /* requests >= this are aligned */
    sharded_ptr_map moved;     /* aligned pointer -> upstream pointer, where they differ */
    uint64_t nmoved;           /* its entries (atomic): a small free looks in it only when some */
    crmm_fork_guard fork_guard; /* moved's locks around fork() */
    crmm_alloc_counters counters;
} aligned_resource;

/* 16 shards: threads freeing different blocks rarely meet on a lock. */
#define ALIGNED_MAP_SHARD_BITS 4

static bool passes_through(const aligned_resource *a, size_t bytes)
{
    return a->alignment == CRMM_ALLOCATION_ALIGNMENT || bytes < a->threshold;
}

/* Bytes to take from upstream for an aligned request of `bytes`; false when it overflows. */
static bool upstream_size(const aligned_resource *a, size_t bytes, size_t *out)
{
    size_t extra = a->alignment - CRMM_ALLOCATION_ALIGNMENT;
    if (bytes > SIZE_MAX - (a->alignment - 1) - extra)
        return false;
    *out = ((bytes + a->alignment - 1) & ~(a->alignment - 1)) + extra;
    return true;
}

static crmm_status aligned_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    aligned_resource *a = (aligned_resource *)self;
    crmm_status st;
    if (passes_through(a, bytes)) {
        st = crmm_resource_allocate(self->upstream, bytes, stream, ptr);
    } else {
        size_t size;
        if (!upstream_size(a, bytes, &size))
            return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "aligned '%s': failed to allocate %zu bytes (the size overflows when aligned to %zu)",
                                  self->name, bytes, a->alignment);
        void *p;
        if ((st = crmm_resource_allocate(self->upstream, size, stream, &p)) != CRMM_OK)
            return st;
        void *q = (void *)(((uintptr_t)p + a->alignment - 1) & ~(uintptr_t)(a->alignment - 1));
        if (q != p && !sharded_ptr_map_put(&a->moved, (uintptr_t)q, (uintptr_t)p)) {
            crmm_resource_deallocate(self->upstream, p, size, stream);
            return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "aligned '%s': cannot grow the pointer map", self->name);
        }
        if (q != p)
            __atomic_add_fetch(&a->nmoved, 1, __ATOMIC_RELAXED);
        *ptr = q;
    }
    if (st == CRMM_OK)
        crmm_counters_add(&a->counters, bytes, CRMM_COUNT_SHARED);
    return st;
}

static crmm_status aligned_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    aligned_resource *a = (aligned_resource *)self;
    size_t size = bytes;
    if (!passes_through(a, bytes) && !upstream_size(a, bytes, &size))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "aligned '%s': deallocate of %zu bytes: no such allocation", self->name, bytes);
    crmm_status st;
    if (passes_through(a, bytes)) {
        /* a block this adaptor moved, freed with a size below the threshold: its upstream pointer
         * is not ptr, and an upstream that takes no size (system, callback) would free an
         * interior pointer */
        if (a->alignment != CRMM_ALLOCATION_ALIGNMENT && __atomic_load_n(&a->nmoved, __ATOMIC_RELAXED) &&
            sharded_ptr_map_contains(&a->moved, (uintptr_t)ptr))
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "aligned '%s': deallocate of %p with %zu bytes: it was "
                                  "allocated with at least %zu (aligned), not %zu", self->name, ptr, bytes,
                                  a->threshold, bytes);
        st = crmm_resource_deallocate(self->upstream, ptr, bytes, stream);
    } else {
        uintptr_t original;
        bool moved = sharded_ptr_map_take(&a->moved, (uintptr_t)ptr, &original);
        if (!moved)
            original = (uintptr_t)ptr; /* the upstream pointer was aligned already */
        st = crmm_resource_deallocate(self->upstream, (void *)original, size, stream);
        if (st != CRMM_OK && moved) /* refused upstream: the block is still live, keep its mapping */
            moved = !sharded_ptr_map_put(&a->moved, (uintptr_t)ptr, original);
        if (moved)
            __atomic_sub_fetch(&a->nmoved, 1, __ATOMIC_RELAXED);
    }
    /* count only what upstream took back; two sizes that align to the same upstream block
     * cannot be told apart, so the counters stop at zero instead of wrapping */
    if (st == CRMM_OK)
        crmm_counters_sub(&a->counters, bytes, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
    return st;
}

static crmm_status aligned_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    return crmm_counted_query(self, &((aligned_resource *)self)->counters, what, out);
}

static void aligned_destroy(crmm_resource *self)
{
    aligned_resource *a = (aligned_resource *)self;
    crmm_fork_guard_remove(&a->fork_guard);
    crmm_counted_report_leaks(self, &a->counters);
    sharded_ptr_map_destroy(&a->moved);
    free(a);
}

static const crmm_resource_ops aligned_ops = {
    .allocate = aligned_allocate, .deallocate = aligned_deallocate, .query = aligned_query,
    .destroy = aligned_destroy,
};

/* The parameters, as crmm_params_parse fills them from aligned_params. */
typedef struct aligned_config {
    uint64_t alignment;
    uint64_t alignment_threshold;
} aligned_config;

static crmm_status check_alignment(uint64_t alignment)
{
    if (alignment & (alignment - 1))
        return crmm_set_error(CRMM_ERROR_CONFIG, "aligned: alignment: %llu is not a power of two",
                              (unsigned long long)alignment);
    return CRMM_OK;
}

/* crmm_plugin.validate: the alignment is a power of two (a percentage is checked at create). */
static crmm_status aligned_validate(const crmm_params *params, bool host_memory, const char **key)
{
    (void)host_memory;
    uint64_t alignment = 0;
    if (crmm_params_size_percent(params, "alignment", NULL) || crmm_params_get_size(params, "alignment", &alignment) != CRMM_OK)
        return CRMM_OK;
    *key = "alignment";
    return check_alignment(alignment);
}

static crmm_status aligned_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    aligned_config cfg = {0};
    crmm_status st = crmm_params_parse(params, &cfg); /* "N%" needs a device */
    if (st == CRMM_OK)
        st = check_alignment(cfg.alignment);
    if (st != CRMM_OK)
        return st;
    uint64_t alignment = cfg.alignment, threshold = cfg.alignment_threshold;
    if (alignment < CRMM_ALLOCATION_ALIGNMENT)
        alignment = CRMM_ALLOCATION_ALIGNMENT; /* as RMM: smaller powers of two become 256 */
    aligned_resource *a = calloc(1, sizeof *a);
    if (!a || !sharded_ptr_map_init(&a->moved, ALIGNED_MAP_SHARD_BITS, sizeof(ptr_map_pair))) {
        free(a);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "aligned: malloc failed");
    }
    a->alignment = (size_t)alignment;
    a->threshold = (size_t)threshold;
    sharded_ptr_map_add_fork_guard(&a->moved, &a->fork_guard);
    return adaptor_publish(&a->base, &aligned_ops, "aligned", upstream, out);
}

static const crmm_param aligned_params[] = {
    {.key = "alignment", .type = CRMM_PARAM_SIZE, .default_value = "256",
     .help = "alignment of large blocks: a power of two up to 1TiB (below 256 counts as 256)",
     .offset = offsetof(aligned_config, alignment), .min = 1, .max = (uint64_t)1 << 40},
    {.key = "alignment_threshold", .type = CRMM_PARAM_SIZE, .default_value = "0",
     .help = "requests of at least this many bytes are aligned; smaller pass through",
     .offset = offsetof(aligned_config, alignment_threshold)},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "aligned", .upstream = CRMM_UPSTREAM_REQUIRED, .params = aligned_params,
                  .config_size = sizeof(aligned_config), .validate = aligned_validate,
                  .create = aligned_create,
                  .description = "aligns large blocks to more than 256 bytes, e.g. 4 KiB for GPUDirect Storage (RMM aligned_resource_adaptor); a bad free is refused where upstream refuses it; two sizes that align to one upstream block cannot be told apart (counters stop at 0)")
