/* crmm/resource.h — the memory-resource ABI that every allocator implements.
 *
 * A resource is a struct whose first member is `crmm_resource` (the base below), followed by the
 * plugin's own state. Its ops table gives allocate/deallocate and destroy (required), and query,
 * trim, control and the calls that never wait, try_allocate/try_deallocate (optional, NULL when
 * unsupported). The contract (docs/contracts.md in the source tree):
 *  - Device pointers are 256-byte aligned (CRMM_ALLOCATION_ALIGNMENT).
 *  - allocate(0) gives NULL and CRMM_OK without calling upstream; deallocate(NULL) is a no-op.
 *    (crmm_resource_allocate/deallocate do both before calling the ops, so plugins never see
 *    either case.)
 *  - Stream-ordered: memory from allocate(bytes, s) may be used on s at once; the stream given to
 *    deallocate is the last one that used it; the resource may reuse it on that stream at once and
 *    on another stream only after ordering that stream behind the free.
 *  - Thread-safe: any thread may allocate and deallocate at any time.
 *  - Reference-counted: create gives one reference; crmm_resource_release of the last one
 *    destroys it, then releases its upstream. Destroying with live allocations logs them (count,
 *    bytes) at warn level.
 *  - Running out of memory is CRMM_ERROR_OUT_OF_MEMORY, with the sizes in the message. */
#ifndef CRMM_RESOURCE_H
#define CRMM_RESOURCE_H

#include <crmm/export.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <crmm/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A CUDA stream handle: the same type as cudaStream_t, declared here so that this header does
 * not need the CUDA headers. NULL is the legacy default stream. */
struct CUstream_st;
typedef struct CUstream_st *crmm_cuda_stream_t;

/* The per-thread default stream handle (cudaStreamPerThread). */
#define CRMM_CUDA_STREAM_PER_THREAD ((crmm_cuda_stream_t)0x2)

/* Alignment of every pointer a device resource returns. */
#define CRMM_ALLOCATION_ALIGNMENT 256u

typedef struct crmm_resource crmm_resource;

/* What crmm_resource_query can ask. Every answer is a uint64_t. */
typedef enum crmm_query {
    CRMM_QUERY_BYTES_IN_USE = 1,       /* bytes currently handed out (as requested) */
    CRMM_QUERY_BYTES_IN_USE_PEAK = 2,  /* the highest BYTES_IN_USE so far */
    CRMM_QUERY_BYTES_RESERVED = 3,     /* bytes currently held from upstream */
    CRMM_QUERY_BYTES_RESERVED_PEAK = 4,/* the highest BYTES_RESERVED so far */
    CRMM_QUERY_BYTES_FREE = 5,         /* reserved bytes not handed out (cached) */
    CRMM_QUERY_LARGEST_FREE_BLOCK = 6, /* the largest block that could be handed out at once */
    CRMM_QUERY_UPSTREAM_BLOCKS = 7,    /* number of blocks held from upstream */
    CRMM_QUERY_ALLOCATIONS = 8,        /* number of live allocations */
    CRMM_QUERY_ALLOCATIONS_PEAK = 9,   /* the highest ALLOCATIONS so far */
    CRMM_QUERY_ALLOCATIONS_TOTAL = 10, /* allocations made since creation */
    CRMM_QUERY_BYTES_TOTAL = 11,       /* bytes allocated since creation */
    CRMM_QUERY_MAXIMUM_SIZE = 12,      /* the most the resource will ever reserve (UINT64_MAX: none) */
    CRMM_QUERY_PLUGIN_FIRST = 1000     /* the first query of a plugin's own (see below) */
} crmm_query;
/* The queries above are the core's: they mean the same to every kind, and a layer that cannot
 * answer one passes it to its upstream. A plugin's own queries are keyed by (kind, query), as ops
 * are: each plugin numbers them from CRMM_QUERY_PLUGIN_FIRST in its own header (pool and async
 * both start there, meaning different things), and such a query is answered by a layer of that
 * kind only, never passed on (crmm_resource_query_kind reaches it from the top of a chain). */

/* Properties (crmm_resource.flags). */
#define CRMM_RESOURCE_DEVICE_ACCESSIBLE 0x1u /* memory is usable by device code / cudaMemcpy as device memory */
#define CRMM_RESOURCE_HOST_ACCESSIBLE 0x2u   /* memory is usable from host code */

typedef struct crmm_resource_ops {
    /* Allocate `bytes` (> 0) for use on `stream`; store the pointer in *ptr. */
    crmm_status (*allocate)(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr);
    /* Free `ptr` (non-NULL) of `bytes` (as allocated); `stream` was the last to use it. */
    crmm_status (*deallocate)(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream);
    /* Optional. Answer `what`; CRMM_ERROR_UNSUPPORTED for queries the resource cannot answer.
     * Unset: crmm_resource_query asks the upstream (none: CRMM_ERROR_UNSUPPORTED). */
    crmm_status (*query)(crmm_resource *self, crmm_query what, uint64_t *out);
    /* Optional. Give cached memory back to upstream. Unset: crmm_resource_trim trims the
     * upstream (none: nothing to do), so an adaptor that caches nothing leaves it unset. */
    crmm_status (*trim)(crmm_resource *self);
    /* Free the resource's own state (the upstream is released by the core afterwards). */
    void (*destroy)(crmm_resource *self);
    /* Optional. Plugin-specific operations. An op is keyed by (kind, op): each plugin numbers
     * its ops from 1 in its own header, and numbers below 1 are the core's (CRMM_IPC_OP_EXPORT),
     * which mean the same to every kind that answers them. The core delivers an op to the first
     * layer of its kind in a chain (crmm_resource_control_kind); a layer never passes an op on
     * by hand. CRMM_ERROR_UNSUPPORTED for an op it does not know. */
    crmm_status (*control)(crmm_resource *self, int op, void *arg);
    /* Optional. allocate and deallocate without waiting: done only when the resource can serve
     * the call at once from what it holds (no lock another thread holds, no CUDA call that may
     * wait, no upstream call, no malloc); then true, as allocate/deallocate would have done it.
     * Otherwise false with nothing changed and no error recorded: the caller makes the ordinary
     * call (a bad free, too, gets its message there). For callers that must not block where
     * they stand, such as a Python binding holding the GIL. Unset: never served. */
    bool (*try_allocate)(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr);
    bool (*try_deallocate)(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream);
    void *reserved[2];         /* NULL; room to grow */
} crmm_resource_ops;

/* The base of every resource. Plugins fill it with crmm_resource_init() and do not touch
 * `refs` afterwards. */
struct crmm_resource {
    const crmm_resource_ops *ops;
    unsigned flags;            /* CRMM_RESOURCE_* properties */
    int device;                /* CUDA device ordinal it allocates on; -1 for host memory */
    const char *kind;          /* plugin name, e.g. "pool" (static string) */
    crmm_resource *upstream;   /* the upstream it holds a reference to, or NULL */
    long refs;                 /* reference count (atomic; core only) */
    char name[48];             /* instance name, e.g. the config section "main" ("" if none) */
    void *reserved[4];         /* zero; room to grow */
};

/* Fill the base: ops, flags and device as given, kind, upstream (a reference is taken here),
 * one reference. `self` must point at zeroed memory or a fresh struct (NULL: nothing done). */
CRMM_API void crmm_resource_init(crmm_resource *self, const crmm_resource_ops *ops, const char *kind,
                        unsigned flags, int device, crmm_resource *upstream);

/* Allocate through `mr`. bytes == 0 → *ptr = NULL, CRMM_OK. Errors: CRMM_ERROR_INVALID_ARGUMENT
 * (mr or ptr NULL), CRMM_ERROR_OUT_OF_MEMORY, CRMM_ERROR_BAD_ALLOC, CRMM_ERROR_CUDA,
 * CRMM_ERROR_STATE (device memory once the process is exiting). *ptr is NULL on failure. */
CRMM_API crmm_status crmm_resource_allocate_checked(crmm_resource *mr, size_t bytes, crmm_cuda_stream_t stream, void **ptr);
/* Free `ptr` of `bytes` through `mr`. ptr == NULL → no-op, CRMM_OK. Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (mr NULL, or a pointer the resource does not know when it can
 * tell), CRMM_ERROR_CUDA, CRMM_ERROR_UNSUPPORTED (a free on a stream being captured into a CUDA
 * graph, by a resource that cannot free there: cuda, managed, pinned, system, sam_headroom). */
CRMM_API crmm_status crmm_resource_deallocate_checked(crmm_resource *mr, void *ptr, size_t bytes, crmm_cuda_stream_t stream);

/* crmm_resource_allocate / crmm_resource_deallocate: the functions above, with their common case
 * (valid arguments, bytes > 0, ptr != NULL) inlined into the caller: one test and the indirect
 * call through the ops table, so that dispatch through the ABI costs what an indirect call
 * costs. Everything else goes to the _checked functions, which libcrmm also exports under the
 * plain names for callers that cannot use this header (dlsym, FFI). Define
 * CRMM_NO_INLINE_DISPATCH before including crmm headers to call the exported functions. */
/* What a failed allocate or deallocate of `mr` returns: `status`, with the thread's error set to
 * a message naming mr and status when the thread's recorded status is not `status` (the resource
 * recorded nothing, or another status, perhaps an older failure's, whose message the new one
 * quotes), so that a caller that reads crmm_last_status() or adds context to it sees this
 * failure's status, never CRMM_OK. CRMM_ERROR_INVALID_ARGUMENT for a NULL mr. */
CRMM_API crmm_status crmm_resource_failure(const crmm_resource *mr, crmm_status status);
#if defined(CRMM_NO_INLINE_DISPATCH)
CRMM_API crmm_status crmm_resource_allocate(crmm_resource *mr, size_t bytes, crmm_cuda_stream_t stream, void **ptr);
CRMM_API crmm_status crmm_resource_deallocate(crmm_resource *mr, void *ptr, size_t bytes, crmm_cuda_stream_t stream);
#else
static inline crmm_status crmm_resource_allocate(crmm_resource *mr, size_t bytes, crmm_cuda_stream_t stream,
                                                 void **ptr)
{
    if (__builtin_expect(mr != NULL && ptr != NULL && bytes != 0, 1)) {
        crmm_status st = mr->ops->allocate(mr, bytes, stream, ptr);
        if (__builtin_expect(st != CRMM_OK, 0)) {
            *ptr = NULL;
            return crmm_resource_failure(mr, st);
        }
        return st;
    }
    return crmm_resource_allocate_checked(mr, bytes, stream, ptr);
}
static inline crmm_status crmm_resource_deallocate(crmm_resource *mr, void *ptr, size_t bytes,
                                                   crmm_cuda_stream_t stream)
{
    if (__builtin_expect(mr != NULL && ptr != NULL, 1)) {
        crmm_status st = mr->ops->deallocate(mr, ptr, bytes, stream);
        return __builtin_expect(st != CRMM_OK, 0) ? crmm_resource_failure(mr, st) : st;
    }
    return crmm_resource_deallocate_checked(mr, ptr, bytes, stream);
}
#endif
/* allocate / deallocate only if `mr` can do it without waiting (crmm_resource_ops.try_allocate):
 * true when done; false, with nothing changed and no error recorded, when the caller must make
 * the ordinary call instead (also for NULL arguments and a resource without the op). bytes == 0
 * and ptr == NULL are done at once, as the ordinary calls do them. */
CRMM_API bool crmm_resource_try_allocate(crmm_resource *mr, size_t bytes, crmm_cuda_stream_t stream, void **ptr);
CRMM_API bool crmm_resource_try_deallocate(crmm_resource *mr, void *ptr, size_t bytes, crmm_cuda_stream_t stream);
/* Ask a question (see crmm_query). A core query goes down the chain until a layer answers it (a
 * resource without a query op passes it on); a plugin's own query (>= CRMM_QUERY_PLUGIN_FIRST) is
 * asked of mr alone, as a query of mr's kind. CRMM_ERROR_UNSUPPORTED when the resource cannot
 * answer, CRMM_ERROR_INVALID_ARGUMENT for NULL arguments. */
CRMM_API crmm_status crmm_resource_query(crmm_resource *mr, crmm_query what, uint64_t *out);
/* Query (kind, what): crmm_resource_query on the first resource of kind `kind` in mr's chain (a
 * pool's page counts under a statistics layer). Errors: CRMM_ERROR_INVALID_ARGUMENT (NULL
 * argument), CRMM_ERROR_UNSUPPORTED "resource 'NAME' (KIND) has no <kind> layer" when the chain
 * has none, else what that layer's query returns. */
CRMM_API crmm_status crmm_resource_query_kind(crmm_resource *mr, const char *kind, crmm_query what, uint64_t *out);
/* For a query op: what a layer does not answer itself. A core query goes to self's upstream;
 * a plugin's own query stays unanswered (CRMM_ERROR_UNSUPPORTED naming the layer): it was asked
 * of self's kind, and the upstream's numbers mean other things. CRMM_ERROR_UNSUPPORTED too for a
 * layer without an upstream, CRMM_ERROR_INVALID_ARGUMENT for a NULL argument; else what the
 * upstream's query returns. */
CRMM_API crmm_status crmm_resource_query_upstream(crmm_resource *self, crmm_query what, uint64_t *out);
/* 1 − largest free block / free bytes, from the two queries; 0 when nothing is free.
 * CRMM_ERROR_UNSUPPORTED when the resource cannot tell, CRMM_ERROR_INVALID_ARGUMENT for a NULL
 * argument. */
CRMM_API crmm_status crmm_resource_fragmentation(crmm_resource *mr, double *out);
/* Give cached memory back upstream: the resource's trim, or, where it has none, its upstream's
 * (down the chain); CRMM_OK and nothing done when no resource in the chain caches.
 * CRMM_ERROR_INVALID_ARGUMENT for NULL; else what the trimming layer returns (CRMM_ERROR_CUDA
 * when giving memory back fails). */
CRMM_API crmm_status crmm_resource_trim(crmm_resource *mr);
/* Run op `op` of mr's own kind on mr (see crmm_resource_ops.control); to reach a layer below,
 * name its kind with crmm_resource_control_kind. CRMM_ERROR_UNSUPPORTED when the resource has no
 * such op; CRMM_ERROR_INVALID_ARGUMENT for a NULL resource. */
CRMM_API crmm_status crmm_resource_control(crmm_resource *mr, int op, void *arg);
/* The first resource of kind `kind` in the chain mr, mr's upstream, its upstream, ... (borrowed),
 * or NULL. E.g. find the statistics layer under a logging adaptor. */
CRMM_API crmm_resource *crmm_resource_find_kind(crmm_resource *mr, const char *kind);
/* Op (kind, op): crmm_resource_control on the first resource of kind `kind` in mr's chain,
 * every layer of another kind passing it on to its upstream. How the adaptor headers reach
 * their layer (crmm_statistics_get finds statistics under logging). Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (NULL mr or kind), CRMM_ERROR_UNSUPPORTED "resource 'NAME' (KIND)
 * has no <kind> layer" when the chain has none, else what that layer's control returns. */
CRMM_API crmm_status crmm_resource_control_kind(crmm_resource *mr, const char *kind, int op, void *arg);
/* True when the resource's memory is usable from device / host code. False for NULL. */
CRMM_API bool crmm_resource_is_device_accessible(const crmm_resource *mr);
CRMM_API bool crmm_resource_is_host_accessible(const crmm_resource *mr);
/* The plugin name ("pool") and instance name ("main", or "" when unnamed). "" for NULL. */
CRMM_API const char *crmm_resource_kind(const crmm_resource *mr);
CRMM_API const char *crmm_resource_name(const crmm_resource *mr);
/* The upstream (borrowed) or NULL. */
CRMM_API crmm_resource *crmm_resource_upstream(const crmm_resource *mr);

/* Take one more reference; returns mr (NULL stays NULL). */
CRMM_API crmm_resource *crmm_resource_retain(crmm_resource *mr);
/* Drop one reference; the last destroys the resource, then releases its upstream. NULL: no-op.
 * Leaves the thread's last error as it was, whatever a destroy records. */
CRMM_API void crmm_resource_release(crmm_resource *mr);
/* Current reference count (for tests and diagnostics); 0 for NULL. */
CRMM_API long crmm_resource_refcount(const crmm_resource *mr);

/* Build a resource from a plugin by name without a config file: `params` is
 * "key=value key=value" (spaces or commas between pairs; a value in double quotes keeps spaces
 * and commas, with \" and \\ for a quote and a backslash), validated against the plugin's
 * parameter table exactly as a config section is. `upstream` may be NULL where the plugin needs
 * none; a reference is taken. The plugin is searched in the plugin_path of the config crmm_init
 * loaded, then $CRMM_PLUGIN_PATH, then the installed directory. The resource is created for the
 * current CUDA device (host plugins need none). Errors: CRMM_ERROR_INVALID_ARGUMENT,
 * CRMM_ERROR_OUT_OF_MEMORY (host memory for the parameters), CRMM_ERROR_PLUGIN (plugin not loadable, or
 * its create gave a resource without allocate, deallocate or destroy: that one is destroyed when
 * it can be), CRMM_ERROR_CONFIG (bad parameter, a quoted value not closed, an upstream given to a
 * plugin that takes none or missing for one that needs it), and whatever the plugin's create
 * returns (with the plugin's message, or a generic one naming the plugin when it set none). */
CRMM_API crmm_status crmm_resource_create(const char *plugin, const char *params, crmm_resource *upstream,
                                 crmm_resource **out);

/* Log the resource's live allocations at warn level when it is destroyed with some left:
 * "<kind> resource '<name>' destroyed with N live allocations (B)" ("<kind> resource destroyed
 * ..." when it has no name). For plugins' destroy. Nothing for count 0 or a NULL mr. */
CRMM_API void crmm_resource_report_leaks(const crmm_resource *mr, uint64_t count, uint64_t bytes);

/* ---- per-device current resources -------------------------------------------------------- */

/* Device ordinals crmm handles: 0 .. CRMM_MAX_DEVICES - 1. */
#define CRMM_MAX_DEVICES 128

/* The current device's resource (borrowed: valid until it is replaced and the replacer releases
 * it; when another thread may replace it, use the _ref variant below instead: retaining the
 * borrowed pointer afterwards races with that release). The first call for a device creates its
 * default: the loaded config's `default` (or [device.N] resource), else the `cuda` plugin. NULL
 * on error (CRMM_ERROR_CUDA without a device, or the default's creation error), with the message
 * in crmm_last_error(). */
CRMM_API crmm_resource *crmm_get_current_device_resource(void);
/* The resource of device `device` (borrowed), created as above. NULL on error
 * (CRMM_ERROR_INVALID_ARGUMENT for a negative or too-large ordinal). */
CRMM_API crmm_resource *crmm_get_per_device_resource(int device);
/* As the two above, but with a reference taken atomically with the look-up: safe while other
 * threads set the resource; release it when done. NULL on error, as above. */
CRMM_API crmm_resource *crmm_get_current_device_resource_ref(void);
CRMM_API crmm_resource *crmm_get_per_device_resource_ref(int device);
/* Make `mr` the current device's resource (a reference is taken) and return the previous one,
 * whose reference passes to the caller (release it when done; NULL if there was none).
 * NULL mr or failure → NULL with crmm_last_error() set. */
CRMM_API crmm_resource *crmm_set_current_device_resource(crmm_resource *mr);
/* As above for device `device`. CRMM_ERROR_INVALID_ARGUMENT for a negative or too-large ordinal. */
CRMM_API crmm_resource *crmm_set_per_device_resource(int device, crmm_resource *mr);

#ifdef __cplusplus
}
#endif
#endif
