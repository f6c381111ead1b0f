/* pool_plugin.c — the `pool` plugin: a stream-ordered, coalescing suballocator over any upstream
 * (RMM's pool_memory_resource), built for speed.
 *
 * The parts: pool_free_list (per-stream O(1) segregated fit), pool_block_map (pointer -> live
 * block in O(1)), pool_block (host-side block and chunk records, with neighbour links for
 * coalescing), pool_streams (per-stream state and the ordering between streams), pool_growth
 * (upstream chunks: growth, trim, release), pool_alloc (the hot path), pool_query. This file holds
 * the descriptor, the parameters, create and destroy.
 *
 * Parameters: initial_size (taken from upstream at creation; default half the device's free
 * memory, and required when the upstream is not device memory, since there is then no device to
 * take a share of), maximum_size (default none), stream_reuse (sync or event: how a block freed
 * on one stream reaches another, see pool_streams.c), fit (which free block serves a request, see
 * pool_free_list.h) and thread_cache (per-thread caches when
 * threads contend for the pool, see pool_thread_cache.h). Sizes are rounded up to 256 bytes, with an
 * info-level note when that changes them. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include <crmm/pool.h>
#include "../common/device_default.h"
#include "../common/plugin_descriptor.h"
#include "../common/resource_label.h"
#include "pool_ipc.h"
#include "pool_resource.h"

/* Round size parameter `key`, held in *v_inout, up to a multiple of 256 B (noted at info level when
 * that changes it); CRMM_ERROR_CONFIG when it has no such multiple. */
static crmm_status round_size(const char *label, const char *key, uint64_t *v_inout)
{
    uint64_t v = *v_inout;
    if (v > UINT64_MAX - (CRMM_ALLOCATION_ALIGNMENT - 1))
        return crmm_set_error(CRMM_ERROR_CONFIG, "%s: %s of %llu bytes is too large", label, key, (unsigned long long)v);
    uint64_t rounded = (v + CRMM_ALLOCATION_ALIGNMENT - 1) & ~(uint64_t)(CRMM_ALLOCATION_ALIGNMENT - 1);
    if (rounded != v)
        crmm_log(CRMM_LOG_INFO, "%s: %s of %llu bytes rounded up to %llu (a multiple of %u bytes)", label, key,
                 (unsigned long long)v, (unsigned long long)rounded, CRMM_ALLOCATION_ALIGNMENT);
    *v_inout = rounded;
    return CRMM_OK;
}

/* The parameters, where crmm_params_parse puts them; pool_create then rounds the sizes and gives
 * initial_size its default by what the upstream is. */
typedef struct pool_config {
    uint64_t initial_size;
    uint64_t maximum_size;
    bool expandable;
    uint64_t release_threshold;
    uint64_t page_size;  /* 0: the device's allocation granularity */
    int page_moves;      /* index in "wait|idle|never|budget" (POOL_MOVES_*) */
    int stream_reuse;    /* index in "sync|event" */
    int fit;             /* index in "best|newest" (pool_fit) */
    int thread_cache;    /* index in "auto|on|off" */
    bool ipc;
    int ipc_handle_type; /* index in "posix_fd|fabric" */
    int graphs;          /* index in "auto|on|off" */
    int graph_pool;      /* index in "shared|private" */
    const char *plan;    /* a plan file of `crmm plan`; NULL: none */
} pool_config;

/* The enums' choices, in the order of their rows' `choices`. */
static const pool_reuse reuse_modes[] = {POOL_REUSE_SYNC, POOL_REUSE_EVENT};
static const pool_fit fit_modes[] = {POOL_FIT_BEST, POOL_FIT_NEWEST};
static const uint8_t cache_modes[] = {POOL_CACHE_AUTO, POOL_CACHE_ON, POOL_CACHE_OFF};
static const uint8_t graphs_modes[] = {POOL_GRAPHS_AUTO, POOL_GRAPHS_ON, POOL_GRAPHS_OFF};
enum { POOL_IPC_POSIX_FD, POOL_IPC_FABRIC };

/* Whether an expandable pool can map memory itself: its upstream must be a base resource of device
 * memory (the pool takes pages on that device instead of asking it), and the driver and device
 * must support the CUDA virtual memory API. Logs why not, at warn level. */
static bool expandable_possible(const crmm_resource *upstream, const char *label)
{
    const char *why = NULL;
    if (!crmm_resource_is_device_accessible(upstream) || crmm_resource_is_host_accessible(upstream) ||
        upstream->device < 0 || upstream->upstream)
        why = "its upstream is not a base resource of device memory (such as cuda)";
    else if (!pool_vmm_available(upstream->device, &why))
        ;
    else
        return true;
    crmm_log(CRMM_LOG_WARN, "%s: expandable = true, but %s: growing by chunks from upstream '%s' instead", label, why,
             crmm_resource_kind(upstream));
    return false;
}

/* The address range of an expandable pool: twice the most it may hold (its maximum, else the
 * device's memory, also stored in *device_memory), so that memory given back in one place can be
 * mapped again in another even when live blocks are spread over the range. */
static size_t expandable_range(int device, uint64_t maximum, uint64_t *device_memory)
{
    uint64_t total = 0;
    if (crmm_cuda_device_memory(device, NULL, &total) != CRMM_OK) {
        crmm_clear_error();
        total = maximum == POOL_NO_MAXIMUM ? (uint64_t)1 << 40 : maximum;
    }
    *device_memory = total;
    uint64_t most = maximum == POOL_NO_MAXIMUM || maximum > total ? total : maximum;
    return most > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)(most * 2);
}

static void free_state(pool_resource *p)
{
    pool_streams_free(&p->core.streams);
    pool_block_map_free(&p->core.live);
    pool_records_free_all(&p->core.records);
    free(p);
}

static void pool_destroy(crmm_resource *self)
{
    pool_resource *p = (pool_resource *)self;
    pool_fork_guard_remove(p);
    pool_counts sum;
    pool_cache_sum(p, &sum);
    crmm_resource_report_leaks(self, (uint64_t)sum.count, (uint64_t)sum.bytes);
    pool_cache_detach_all(p); /* their blocks are in the chunks, which go back whole */
    pool_capture_detach_all(p); /* so are the blocks parked for graphs */
    pool_release_all(p);
    free_state(p);
}

static crmm_status pool_control(crmm_resource *self, int op, void *arg)
{
    pool_resource *p = (pool_resource *)self;
    char label[80];
    if (op == CRMM_IPC_OP_EXPORT)
        return arg ? pool_ipc_export(p, arg)
                   : crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: ipc export: argument is NULL", pool_label(p, label, sizeof label));
    if (op == CRMM_POOL_OP_RESET_PEAKS) {
        pool_reset_peaks(p);
        return CRMM_OK;
    }
    if (op != CRMM_POOL_OP_FORGET_STREAM)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s has no control operation %d", pool_label(p, label, sizeof label), op);
    crmm_cuda_stream_t stream = (crmm_cuda_stream_t)arg;
    crmm_status st = pool_streams_wait(&p->core.streams, stream); /* outside the lock: it may take long */
    if (st != CRMM_OK)
        return st;
    pool_lock(p);
    if (pool_caching(p))
        pool_cache_drain_all(p); /* the blocks cached for the stream join its list first */
    pool_streams_forget(&p->core.streams, &p->core.records, stream);
    pool_capture_forget_stream(p, stream);
    pool_unlock(p);
    return CRMM_OK;
}

/* trim: the caches' blocks come back first, so that whole chunks and pages can go. */
static crmm_status pool_trim_all(crmm_resource *self)
{
    pool_resource *p = (pool_resource *)self;
    if (pool_caching(p)) {
        pool_lock(p);
        pool_cache_drain_all(p);
        pool_unlock(p);
    }
    return pool_trim(self);
}

static const crmm_resource_ops pool_ops = {
    .allocate = pool_allocate, .deallocate = pool_deallocate, .query = pool_query, .trim = pool_trim_all,
    .destroy = pool_destroy, .control = pool_control, .try_allocate = pool_try_allocate,
    .try_deallocate = pool_try_deallocate,
};

/* initial_size or maximum_size as far as it is known: its bytes, or a percentage of a device's
 * memory not yet resolved (validate runs without a device). */
typedef struct pool_size_known {
    bool given;
    double percent; /* > 0: a percentage, bytes unknown */
    uint64_t bytes;
} pool_size_known;

/* The rules between pool parameters, for validate (sizes as written) and create (sizes in bytes):
 * page_size is 0 or a power of two; over host memory initial_size must be given in bytes;
 * initial_size is at most maximum_size when both are known in the same unit. `label` begins the
 * message; *key names the parameter. */
static crmm_status pool_rules(pool_size_known initial, pool_size_known maximum, uint64_t page_size, bool host_memory,
                              const char *label, const char **key)
{
    *key = "page_size";
    if (page_size & (page_size - 1))
        return crmm_set_error(CRMM_ERROR_CONFIG, "%s: page_size %llu is not a power of two", label,
                              (unsigned long long)page_size);
    *key = "initial_size";
    if (host_memory && (!initial.given || initial.percent > 0))
        return crmm_set_error(CRMM_ERROR_CONFIG, "%s: initial_size is required over host memory, in bytes "
                              "(e.g. initial_size = 64MiB): a percentage and the default refer to a device's memory",
                              label);
    if (!initial.given || !maximum.given || (initial.percent > 0) != (maximum.percent > 0))
        return CRMM_OK; /* compared on the device, once both are bytes */
    char a[32], b[32];
    if (initial.percent > 0) {
        if (initial.percent <= maximum.percent)
            return CRMM_OK;
        snprintf(a, sizeof a, "%g%%", initial.percent);
        snprintf(b, sizeof b, "%g%%", maximum.percent);
    } else {
        if (initial.bytes <= maximum.bytes)
            return CRMM_OK;
        crmm_format_size(initial.bytes, a, sizeof a);
        crmm_format_size(maximum.bytes, b, sizeof b);
    }
    return crmm_set_error(CRMM_ERROR_CONFIG, "%s: initial_size (%s) is larger than maximum_size (%s)", label, a, b);
}

/* A create that fails after crmm_resource_init: what the pool took goes back, with the upstream
 * reference init took; returns st. */
static crmm_status unmake(pool_resource *p, crmm_resource *upstream, crmm_status st)
{
    pool_release_all(p);
    free_state(p);
    crmm_resource_release(upstream);
    return st;
}

/* The plan at path (pool_plan.h) for expandable pool p, its range reserved on the pool's device.
 * Errors: pool_plan_load's, and pool_plan_reserve's naming the plan. */
static crmm_status load_plan(pool_resource *p, const char *path, size_t page_size, const char *label)
{
    pool_plan *pl;
    crmm_status st = pool_plan_load(path, label, &pl);
    if (st != CRMM_OK)
        return st;
    if ((st = pool_plan_reserve(pl, p->growth.vmm.device, page_size)) != CRMM_OK) {
        char a[32];
        crmm_error_add_context("%s: reserving the range of plan %s (%s)", label, path,
                               crmm_format_size(pl->extent, a, sizeof a));
        pool_plan_destroy(pl);
        return st;
    }
    p->plan = pl;
    return CRMM_OK;
}

static crmm_status pool_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    char label[80];
    const char *name = crmm_params_resource_name(params);
    resource_label("pool", name, label, sizeof label);
    bool real = crmm_resource_is_device_accessible(upstream);

    pool_config cfg = {.initial_size = 0, .maximum_size = POOL_NO_MAXIMUM}; /* sizes without a default */
    crmm_status st = crmm_params_parse(params, &cfg);
    if (st != CRMM_OK)
        return crmm_error_add_context("%s", label);
    /* initial_size and maximum_size have no default: given exactly when they have a value */
    bool initial_given = crmm_params_is_set(params, "initial_size");
    bool maximum_given = crmm_params_is_set(params, "maximum_size");
    uint64_t initial = cfg.initial_size, maximum = cfg.maximum_size, threshold = cfg.release_threshold;
    if (maximum_given)
        st = round_size(label, "maximum_size", &maximum);
    if (st == CRMM_OK && initial_given)
        st = round_size(label, "initial_size", &initial);
    if (st != CRMM_OK)
        return st;
    pool_reuse reuse = reuse_modes[cfg.stream_reuse];
    bool expandable = cfg.expandable;
    if ((st = round_size(label, "release_threshold", &threshold)) != CRMM_OK)
        return st;
    if (expandable && !expandable_possible(upstream, label))
        expandable = false;
    if (!initial_given && expandable)
        initial_given = true; /* an expandable pool starts empty and maps what it needs */
    const char *key;
    if ((st = pool_rules((pool_size_known){initial_given, 0, initial}, (pool_size_known){true, 0, maximum},
                         cfg.page_size, !real, label, &key)) != CRMM_OK)
        return st;
    if (!initial_given) {
        int device = upstream->device >= 0 ? upstream->device : crmm_params_device(params);
        if ((st = device_default_half_free(device, label, "initial_size", &initial)) != CRMM_OK)
            return st;
        if (initial > maximum)
            initial = maximum;
    }

    pool_resource *p = calloc(1, sizeof *p);
    if (!p)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed", label);
    p->growth.maximum = maximum;
    p->graphs_mode = graphs_modes[cfg.graphs];
    p->graph_private = cfg.graph_pool == 1;
    /* a host pool has no streams to ask about */
    p->capture_gate = capture_check_gate(!real || p->graphs_mode == POOL_GRAPHS_OFF ? CAPTURE_CHECK_NEVER
                                         : p->graphs_mode == POOL_GRAPHS_ON           ? CAPTURE_CHECK_ALWAYS
                                                                                      : CAPTURE_CHECK_AUTO);
    if ((st = pool_streams_init(&p->core.streams, real, upstream->device, reuse, fit_modes[cfg.fit])) != CRMM_OK ||
        !pool_block_map_init(&p->core.live, 1024) || !pool_records_reserve(&p->core.records, POOL_RECORDS_PER_SLAB)) {
        free_state(p);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "%s: malloc failed", label);
    }
    p->core.streams.capture_gate = p->capture_gate;
    crmm_resource_init(&p->base, &pool_ops, "pool", upstream->flags, upstream->device, upstream);
    snprintf(p->base.name, sizeof p->base.name, "%s", name ? name : "");
    p->growth.initial = initial;
    p->growth.release_threshold = threshold;
    p->growth.page_moves = (uint8_t)cfg.page_moves;
    p->cache.cache_mode = cache_modes[cfg.thread_cache];
    if (expandable && (st = pool_expand_init(p, upstream->device,
                                             expandable_range(upstream->device, maximum, &p->growth.device_memory),
                                             (size_t)cfg.page_size)) != CRMM_OK) {
        crmm_log(CRMM_LOG_WARN, "%s: expandable = true, but reserving its address range failed (%s): growing by chunks "
                 "from upstream '%s' instead", label, crmm_last_error(), crmm_resource_kind(upstream));
        crmm_clear_error();
    } else if (expandable && p->growth.maximum < p->growth.vmm.page) { /* no page would ever fit */
        char a[32], b[32];
        st = crmm_set_error(CRMM_ERROR_CONFIG, "%s: maximum_size (%s) is less than one page (%s): no allocation "
                            "could be served; raise maximum_size, or set expandable = false", label,
                            crmm_format_size(p->growth.maximum, a, sizeof a),
                            crmm_format_size(p->growth.vmm.page, b, sizeof b));
        return unmake(p, upstream, st);
    }
    if (cfg.plan && cfg.plan[0]) {
        if (!cfg.expandable || cfg.ipc)
            return unmake(p, upstream, crmm_set_error(CRMM_ERROR_CONFIG, "%s: a plan needs expandable = true%s", label,
                                                      cfg.ipc ? " and ipc = false (planned blocks cannot be exported)" : ""));
        if (!p->growth.expandable)
            crmm_log(CRMM_LOG_WARN, "%s: not expandable (said above): plan %s is not used", label, cfg.plan);
        else if ((st = load_plan(p, cfg.plan, (size_t)cfg.page_size, label)) != CRMM_OK)
            return unmake(p, upstream, st);
    }
    pool_ipc_setup(p, cfg.ipc, cfg.ipc_handle_type == POOL_IPC_FABRIC);
    if (initial > 0) {
        pool_stream *s = pool_streams_find(&p->core.streams, NULL);
        st = s ? pool_add_chunk(p, s, (size_t)initial, NULL) : CRMM_ERROR_OUT_OF_MEMORY;
        if (st != CRMM_OK) {
            char a[32];
            crmm_error_add_context("%s: cannot take initial_size (%s) from upstream '%s'", label,
                                   crmm_format_size(initial, a, sizeof a), crmm_resource_kind(upstream));
            return unmake(p, upstream, st);
        }
    }
    pool_fork_guard_add(p);
    *out = &p->base;
    return CRMM_OK;
}

/* The largest size that rounds up to a multiple of 256 B: above it, round_size refuses the value,
 * so the table refuses it first and check-config names it. */
#define POOL_SIZE_MAX (UINT64_MAX - (CRMM_ALLOCATION_ALIGNMENT - 1))

/* maximum_size's minimum of 1 also refuses a percentage that comes to 0 bytes */
static const crmm_param pool_params[] = {
    {.key = "initial_size", .type = CRMM_PARAM_SIZE,
     .help = "bytes taken from upstream at creation (default: half the device's free memory; required over host memory)",
     .offset = offsetof(pool_config, initial_size), .max = POOL_SIZE_MAX},
    {.key = "maximum_size", .type = CRMM_PARAM_SIZE,
     .help = "the most the pool takes from upstream (default: no limit)",
     .offset = offsetof(pool_config, maximum_size), .min = 1, .max = POOL_SIZE_MAX},
    {.key = "expandable", .type = CRMM_PARAM_BOOL, .default_value = "false",
     .help = "grow by mapping pages of one reserved virtual address range (CUDA virtual memory API) instead of taking "
             "chunks from upstream: free blocks merge across growth steps, the pool maps only what it needs, and free "
             "pages go back at trim, and move to where the pool grows when it would otherwise pass the most it has held "
             "(the upstream must be a device-memory resource without an upstream, such as cuda, which the pool then "
             "bypasses; otherwise the pool grows by chunks, with a warning); initial_size then defaults to 0",
     .offset = offsetof(pool_config, expandable)},
    {.key = "release_threshold", .type = CRMM_PARAM_SIZE, .default_value = "0",
     .help = "expandable: bytes of free whole pages the pool keeps mapped when it gives memory back (at trim, and when "
             "growth would pass the most it has held; within it, the pool grows without waiting for the device)",
     .offset = offsetof(pool_config, release_threshold), .max = POOL_SIZE_MAX},
    {.key = "page_size", .type = CRMM_PARAM_SIZE, .default_value = "0",
     .help = "expandable: bytes of each physical allocation the pool maps, a power of two (0 = the device's allocation "
             "granularity, 2 MiB on current GPUs; a smaller value means the granularity): the pool grows, moves and "
             "gives back memory in these pages. Larger pages are fewer driver calls, at the cost of coarser growth",
     .offset = offsetof(pool_config, page_size), .max = (uint64_t)1 << 30},
    {.key = "page_moves", .type = CRMM_PARAM_ENUM, .default_value = "wait",
     .help = "expandable: when growth would pass the most the pool has held and free pages could be moved to where it "
             "grows instead: wait = wait for the device, then move them (of wait, idle and never, the pool holds least); idle = move them only when "
             "every stream holding them has finished its work (asked without waiting), else map new pages (no stall of "
             "the host; the pool may hold more until the next growth finds the streams idle); never = always map new "
             "pages (free pages go back at trim and before out of memory, as PyTorch's expandable segments do); budget = "
             "as wait, but while one stream uses the pool its own free pages also move more than once per mark, paid "
             "from a budget of 1/8 of the bytes allocated (at most the mark), unless the growth's request has the size "
             "of the last move's with no new pages mapped since, and a move never raises the mark by the slack it used: "
             "the pool holds less over long runs that do not repeat, at the cost of pages moved in every pass of them "
             "(never a device synchronization on one stream)",
     .offset = offsetof(pool_config, page_moves), .choices = "wait|idle|never|budget"},
    {.key = "stream_reuse", .type = CRMM_PARAM_ENUM, .default_value = "sync",
     .help = "how a block freed on one stream is reused on another: sync = after a device synchronization, never "
             "touching the other stream (safe when streams are destroyed); event = the new stream waits for an event "
             "recorded on the freeing stream, without blocking the host, but a stream that freed memory must not be "
             "destroyed before crmm_pool_forget_stream() is called for it",
     .offset = offsetof(pool_config, stream_reuse), .choices = "sync|event"},
    {.key = "fit", .type = CRMM_PARAM_ENUM, .default_value = "best",
     .help = "which free block serves a request: best = the smallest that holds it among the first 8 of its size "
             "class (of the lowest class above when none there does), the lowest address among equal sizes, as "
             "PyTorch's caching allocator fits; under 8 KiB, where each size has a class of its own, the lowest "
             "address among the first 4 blocks of the first class at or above the size, so that the order in which "
             "small blocks were freed does not decide where they go; newest = the most recently freed block of the "
             "first class that holds it, without a scan",
     .offset = offsetof(pool_config, fit), .choices = "best|newest"},
    {.key = "thread_cache", .type = CRMM_PARAM_ENUM, .default_value = "auto",
     .help = "per-thread caches: each thread keeps the blocks it frees on a stream (up to 255, none over 64 MiB) and "
             "takes them back without the pool's lock; before the pool grows, the growing thread's cache is emptied "
             "(every cache when together they hold more than half the pool), and all at trim, forget_stream, out of "
             "memory and thread exit. auto = once threads contend for the pool's lock (1 in 16 locked calls waits), on = once a second "
             "thread allocates, off = never (cached blocks are not available to other threads: a pool shared by "
             "threads may hold more memory)",
     .offset = offsetof(pool_config, thread_cache), .choices = "auto|on|off"},
    {.key = "ipc", .type = CRMM_PARAM_BOOL, .default_value = "false",
     .help = "expandable: make the pool's pages exportable, so that crmm_ipc_export can share its allocations with "
             "another process (crmm/ipc.h)",
     .offset = offsetof(pool_config, ipc)},
    {.key = "ipc_handle_type", .type = CRMM_PARAM_ENUM, .default_value = "posix_fd",
     .help = "with ipc: what the pages are exported as: posix_fd = file descriptors passed over a UNIX socket, fabric = "
             "fabric handles (where the driver offers them)",
     .offset = offsetof(pool_config, ipc_handle_type), .choices = "posix_fd|fabric"},
    {.key = "graphs", .type = CRMM_PARAM_ENUM, .default_value = "auto",
     .help = "serve streams under CUDA graph capture (docs/cuda-graphs.md): each allocate and free on a stream other "
             "than the legacy default one asks CUDA whether the stream is being captured, and memory a capture "
             "allocates or frees stays the graph's until the graph is destroyed. auto = once the process enabled "
             "capture (crmm_graph_capture_enable: the PyTorch, CuPy and Numba integrations do), on = always, off = "
             "never (capturing through the pool is then unsafe)",
     .offset = offsetof(pool_config, graphs), .choices = "auto|on|off"},
    {.key = "graph_pool", .type = CRMM_PARAM_ENUM, .default_value = "shared",
     .help = "where a capture's allocations come from (docs/cuda-graphs.md): shared = the pool's free blocks, then "
             "growth (the graph holds least); private = whole pages of the graph's alone (free pages of the pool, "
             "else new ones), a 2 MiB segment for requests up to 1 MiB, reused only by its own capture until the graph "
             "is destroyed, as PyTorch's private graph pools: the capture's blocks lie the same way in their pages "
             "whatever the pool held before, at the cost of the pages' unused parts",
     .offset = offsetof(pool_config, graph_pool), .choices = "shared|private"},
    {.key = "plan", .type = CRMM_PARAM_STRING,
     .help = "expandable: a placement plan written by `crmm plan` from a recorded run (docs/expandable-pool.md): requests "
             "that follow the recorded ones, in order and size, on one stream, go where the plan places them, in a range "
             "of their own, so that a run that repeats the recorded one (for as many steps or more) holds about the plan's "
             "extent; other requests are served as without a plan, and a run that stops following it has the plan's "
             "idle pages move to the pool's own growth (a pool that cannot be expandable ignores it, with the warning "
             "that says why; not with ipc = true: planned blocks cannot be exported)",
     .offset = offsetof(pool_config, plan)},
    {NULL},
};

/* crmm_plugin.validate: pool_rules on the sizes as written. */
static crmm_status pool_validate(const crmm_params *params, bool host_memory, const char **key)
{
    pool_size_known initial = {crmm_params_is_set(params, "initial_size"), 0, 0};
    pool_size_known maximum = {crmm_params_is_set(params, "maximum_size"), 0, 0};
    if (!crmm_params_size_percent(params, "initial_size", &initial.percent) && initial.given)
        crmm_params_get_size(params, "initial_size", &initial.bytes);
    if (!crmm_params_size_percent(params, "maximum_size", &maximum.percent) && maximum.given)
        crmm_params_get_size(params, "maximum_size", &maximum.bytes);
    uint64_t page_size = 0;
    if (crmm_params_size_percent(params, "page_size", NULL)) { /* a share of a device is no power of two */
        *key = "page_size";
        return crmm_set_error(CRMM_ERROR_CONFIG, "pool: page_size is a number of bytes, a power of two (e.g. 2MiB), "
                              "not a share of device memory");
    }
    crmm_params_get_size(params, "page_size", &page_size);
    const char *plan = NULL;
    bool expandable = false;
    crmm_params_get_bool(params, "expandable", &expandable);
    if (crmm_params_get_string(params, "plan", &plan) == CRMM_OK && plan && plan[0]) {
        *key = "plan";
        bool ipc = false;
        crmm_params_get_bool(params, "ipc", &ipc);
        if (!expandable || ipc)
            return crmm_set_error(CRMM_ERROR_CONFIG, "pool: a plan needs expandable = true%s",
                                  ipc ? " and ipc = false (planned blocks cannot be exported)" : "");
        pool_plan *pl;
        crmm_status st = pool_plan_load(plan, "pool", &pl);
        if (st != CRMM_OK)
            return st;
        pool_plan_destroy(pl);
    }
    crmm_clear_error();
    return pool_rules(initial, maximum, page_size, host_memory, "pool", key);
}

PLUGIN_DESCRIPTOR(.name = "pool", .upstream = CRMM_UPSTREAM_REQUIRED, .params = pool_params,
                  .config_size = sizeof(pool_config), .validate = pool_validate, .create = pool_create,
                  .description = "stream-ordered coalescing suballocator (RMM's pool) with O(1) segregated fit; refuses a double or foreign free and a size other than the one asked for")
