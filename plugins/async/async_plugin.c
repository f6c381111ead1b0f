/* async_plugin.c — the `async` plugin: stream-ordered allocation from a private cudaMemPool
 * (RMM's cuda_async_memory_resource).
 *
 * Create makes a pool on the device (pinned device memory, optionally exportable as a POSIX
 * file descriptor or fabric handle), sets its release threshold (default: never give memory
 * back at synchronization) and, when initial_pool_size is given, primes it by allocating that
 * much and freeing it. Allocate/free are cudaMallocFromPoolAsync/cudaFreeAsync on the caller's
 * stream; the driver does the stream ordering. Lock-free counters give the ABI's as-requested
 * byte counts and the leak report; reserved bytes come from the pool's attributes.
 *
 * serialize_calls (default true): the driver runs the calls on one memory pool one at a time
 * anyway, but when several threads call at once each call takes longer than when they take
 * turns (bench/RESULTS.md has the figures). So the resource lets one
 * thread at a time into the driver, under a spin lock that yields after a few hundred spins
 * (plugins/common/spin_lock.h); a lone thread pays one uncontended lock per call. */
#include "build_config.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <crmm/alloc_counters.h>
#include <crmm/async.h>
#include <crmm/cuda_support.h>
#include <crmm/ipc.h>
#include <crmm/log.h>
#include <crmm/plugin.h>
#include "../common/device_check.h"
#include "../common/plugin_descriptor.h"
#include "../common/spin_lock.h"

typedef struct async_resource {
    crmm_resource base;
    cudaMemPool_t pool;
    bool serialize;                /* parameter serialize_calls: driver calls under `lock` */
    int lock;
    unsigned forks;                /* `forks` when it was made */
    crmm_alloc_counters counters;
    enum cudaMemAllocationHandleType export_type; /* what the pool exports (cudaMemHandleTypeNone: nothing) */
    int pool_fd;                   /* posix_fd: the pool's shareable handle once exported, else -1 */
} async_resource;

/* Forks so far in this process's line (bumped in every child). A child may inherit the lock
 * held by a thread that does not exist there: a resource made before the fork takes no lock in
 * the child, whose CUDA calls then fail with the driver's own error instead of hanging. */
static unsigned forks;
static pthread_once_t fork_hook_once = PTHREAD_ONCE_INIT;
static void count_fork_in_child(void) { forks++; }
static void install_fork_hook(void) { pthread_atfork(NULL, NULL, count_fork_in_child); }

static inline void driver_enter(async_resource *a)
{
    if (a->serialize && a->forks == forks)
        spin_lock(&a->lock);
}

static inline void driver_leave(async_resource *a)
{
    if (a->serialize && a->forks == forks)
        spin_unlock(&a->lock);
}

static crmm_status async_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    async_resource *a = (async_resource *)self;
    if (crmm_process_exiting())
        return crmm_set_error(CRMM_ERROR_STATE, "async '%s': the process is exiting: no device allocation", self->name);
    crmm_device_guard g;
    crmm_status st = device_check_enter_for_stream(self->device, stream, &g);
    if (st != CRMM_OK)
        return crmm_error_add_context("async '%s'", self->name);
    driver_enter(a);
    cudaError_t e = cudaMallocFromPoolAsync(ptr, bytes, a->pool, (cudaStream_t)stream);
    driver_leave(a);
    crmm_cuda_device_restore(&g);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* leave no stale error for the caller's own checks */
        crmm_cuda_status(e, "cudaMallocFromPoolAsync");
        char sz[32];
        return crmm_error_add_context("async '%s': failed to allocate %s", self->name, crmm_format_size(bytes, sz, sizeof sz));
    }
    crmm_counters_add(&a->counters, bytes, CRMM_COUNT_SHARED);
    return CRMM_OK;
}

static crmm_status async_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    async_resource *a = (async_resource *)self;
    if (crmm_process_exiting()) {
        crmm_counters_sub(&a->counters, bytes, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
        return CRMM_OK; /* the driver is going away and takes the pool with it */
    }
    crmm_device_guard g;
    crmm_status st = device_check_enter_for_stream(self->device, stream, &g);
    if (st != CRMM_OK)
        return crmm_error_add_context("async '%s'", self->name);
    driver_enter(a);
    cudaError_t e = cudaFreeAsync(ptr, (cudaStream_t)stream);
    driver_leave(a);
    crmm_cuda_device_restore(&g);
    st = crmm_cuda_status(e, "async: cudaFreeAsync");
    if (st == CRMM_OK)
        crmm_counters_sub(&a->counters, bytes, CRMM_COUNT_SHARED | CRMM_COUNT_FLOOR0);
    return st;
}

static crmm_status pool_attribute(const async_resource *a, enum cudaMemPoolAttr attr, uint64_t *out)
{
    uint64_t v = 0;
    crmm_status st = crmm_cuda_status(cudaMemPoolGetAttribute(a->pool, attr, &v), "async: cudaMemPoolGetAttribute");
    if (st == CRMM_OK)
        *out = (uint64_t)v;
    return st;
}

static crmm_status async_query(crmm_resource *self, crmm_query what, uint64_t *out)
{
    async_resource *a = (async_resource *)self;
    if (crmm_counters_query(&a->counters, what, out) == CRMM_OK)
        return CRMM_OK;
    uint64_t reserved, used;
    crmm_status st;
    switch ((int)what) {
    case CRMM_QUERY_BYTES_RESERVED: return pool_attribute(a, cudaMemPoolAttrReservedMemCurrent, out);
    case CRMM_QUERY_BYTES_RESERVED_PEAK: return pool_attribute(a, cudaMemPoolAttrReservedMemHigh, out);
    case CRMM_QUERY_ASYNC_POOL_USED: return pool_attribute(a, cudaMemPoolAttrUsedMemCurrent, out);
    case CRMM_QUERY_ASYNC_POOL_USED_PEAK: return pool_attribute(a, cudaMemPoolAttrUsedMemHigh, out);
    case CRMM_QUERY_BYTES_FREE:
        if ((st = pool_attribute(a, cudaMemPoolAttrReservedMemCurrent, &reserved)) == CRMM_OK &&
            (st = pool_attribute(a, cudaMemPoolAttrUsedMemCurrent, &used)) == CRMM_OK)
            *out = reserved > used ? reserved - used : 0;
        return st;
    case CRMM_QUERY_MAXIMUM_SIZE: *out = UINT64_MAX; return CRMM_OK;
    default: return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "async resource cannot answer query %d", (int)what);
    }
}

static crmm_status async_trim(crmm_resource *self)
{
    async_resource *a = (async_resource *)self;
    if (crmm_process_exiting())
        return CRMM_OK;
    return crmm_cuda_status(cudaMemPoolTrimTo(a->pool, 0), "async: cudaMemPoolTrimTo");
}

/* The pool's descriptor (posix_fd), kept in a->pool_fd for every later export. */
static crmm_status async_export_pool(async_resource *a)
{
    int fd = -1;
    crmm_status st = crmm_cuda_status(cudaMemPoolExportToShareableHandle(&fd, a->pool, a->export_type, 0),
                                      "async: ipc export: cudaMemPoolExportToShareableHandle");
    if (st == CRMM_OK) {
        a->pool_fd = fd;
        (void)fcntl(fd, F_SETFD, FD_CLOEXEC); /* as every descriptor crmm holds: not inherited by exec */
    }
    return st;
}

/* CRMM_IPC_OP_EXPORT: the pool's shareable handle (exported once; each handle gets a
 * duplicate of the descriptor) and the allocation's export data. */
/* The driver's cuMemGetAddressRange, looked up once (NULL: no driver to ask). */
static CUresult (*address_range)(CUdeviceptr *, size_t *, CUdeviceptr);
static pthread_once_t address_range_once = PTHREAD_ONCE_INIT;

static void find_address_range(void)
{
    static const crmm_driver_function table[] = {{"cuMemGetAddressRange", (void **)&address_range}};
    crmm_cuda_driver_lookup(table, 1, NULL, 0);
}

/* The importer maps the size the handle says: refuse a range that runs past the allocation at
 * rq->ptr, as the driver knows it (the range it reports is the allocation's, or memory around it
 * that the pool holds: either way nothing past it may be named). Without a driver or a range to
 * ask about, cudaMemPoolExportPointer's own check stands. */
static crmm_status check_export_range(const async_resource *a, const crmm_ipc_export_request *rq)
{
    pthread_once(&address_range_once, find_address_range);
    if (!address_range)
        return CRMM_OK;
    CUdeviceptr base = 0;
    size_t bytes = 0;
    if (address_range(&base, &bytes, (CUdeviceptr)(uintptr_t)rq->ptr) != CUDA_SUCCESS)
        return CRMM_OK; /* no range to check against: cudaMemPoolExportPointer judges the pointer */
    uintptr_t at = (uintptr_t)rq->ptr, from = (uintptr_t)base;
    if (at < from || at - from > bytes || rq->size > bytes - (at - from))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "async '%s': ipc export of %zu bytes at %p: the allocation there is %zu bytes at %p",
                              a->base.name, rq->size, rq->ptr, bytes, (void *)from);
    return CRMM_OK;
}

static crmm_status async_ipc_export(async_resource *a, crmm_ipc_export_request *rq)
{
    if (a->export_type == cudaMemHandleTypeNone)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED,
                              "async '%s' was made without enable_ipc, enable_fabric or export_handle_type: its memory "
                              "cannot be exported to another process",
                              a->base.name);
    crmm_status range = check_export_range(a, rq);
    if (range != CRMM_OK)
        return range;
    struct cudaMemPoolPtrExportData data;
    memset(&data, 0, sizeof data);
    driver_enter(a);
    /* The pool is shared before any of its allocations is, as CUDA's IPC example orders it: its
     * descriptor is normally exported at create (async_export_pool), and here only when that
     * descriptor was not made there. */
    crmm_status st = CRMM_OK;
    if (a->export_type == cudaMemHandleTypePosixFileDescriptor && a->pool_fd < 0)
        st = async_export_pool(a);
    if (st == CRMM_OK)
        st = crmm_cuda_status(cudaMemPoolExportPointer(&data, rq->ptr), "async: ipc export: cudaMemPoolExportPointer");
    if (st == CRMM_OK && a->export_type == cudaMemHandleTypePosixFileDescriptor) {
        rq->fds = malloc(sizeof *rq->fds);
        if (!rq->fds || (rq->fds[0] = fcntl(a->pool_fd, F_DUPFD_CLOEXEC, 0)) < 0)
            st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "async: ipc export: no room for the pool's descriptor");
    } else if (st == CRMM_OK) {
        cudaMemFabricHandle_t f;
        rq->fabric = malloc(CRMM_IPC_FABRIC_BYTES);
        st = rq->fabric ? crmm_cuda_status(cudaMemPoolExportToShareableHandle(&f, a->pool, a->export_type, 0),
                                           "async: ipc export: cudaMemPoolExportToShareableHandle")
                        : crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "async: ipc export: malloc failed");
        if (st == CRMM_OK)
            memcpy(rq->fabric, &f, sizeof f < CRMM_IPC_FABRIC_BYTES ? sizeof f : CRMM_IPC_FABRIC_BYTES);
    }
    driver_leave(a);
    if (st != CRMM_OK)
        return crmm_error_add_context("async '%s': exporting %p", a->base.name, rq->ptr);
    rq->kind = CRMM_IPC_KIND_ASYNC;
    rq->handle_type = a->export_type == cudaMemHandleTypePosixFileDescriptor ? CRMM_IPC_POSIX_FD : CRMM_IPC_FABRIC;
    rq->device = a->base.device;
    rq->count = 1;
    memcpy(rq->pointer_data, &data, sizeof data < sizeof rq->pointer_data ? sizeof data : sizeof rq->pointer_data);
    return CRMM_OK;
}

static crmm_status async_control(crmm_resource *self, int op, void *arg)
{
    async_resource *a = (async_resource *)self;
    if (op == CRMM_IPC_OP_EXPORT)
        return arg ? async_ipc_export(a, arg) : crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "async: ipc export: argument is NULL");
    if (op != CRMM_ASYNC_OP_GET_POOL)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "async resource has no control op %d", op);
    if (!arg)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "async: get_pool: argument is NULL");
    *(void **)arg = (void *)a->pool;
    return CRMM_OK;
}

static void async_destroy(crmm_resource *self)
{
    async_resource *a = (async_resource *)self;
    crmm_resource_report_leaks(self, (uint64_t)a->counters.count, (uint64_t)a->counters.bytes);
    /* With allocations still out, the driver frees the pool once they are freed. A refusal is
     * logged and taken off the runtime's last error, where the caller would find it as its own. */
    if (!crmm_process_exiting() && crmm_cuda_status(cudaMemPoolDestroy(a->pool), "async: cudaMemPoolDestroy") != CRMM_OK)
        crmm_log(CRMM_LOG_WARN, "%s", crmm_last_error());
    if (a->pool_fd >= 0)
        close(a->pool_fd);
    free(a);
}

static const crmm_resource_ops async_ops = {
    .allocate = async_allocate, .deallocate = async_deallocate, .query = async_query, .trim = async_trim,
    .destroy = async_destroy, .control = async_control,
};

/* ---- create -------------------------------------------------------------------------------- */

/* The export handle types, in the order of export_handle_type's choices. */
static const struct { const char *name; enum cudaMemAllocationHandleType type; } handle_types[] = {
    {"none", cudaMemHandleTypeNone},
    {"posix_fd", cudaMemHandleTypePosixFileDescriptor},
    {"fabric", cudaMemHandleTypeFabric},
};

/* The names of the export handle types in `mask`, for messages. */
static const char *handle_type_names(int mask, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 1; i < sizeof handle_types / sizeof handle_types[0]; i++)
        if (mask & (int)handle_types[i].type)
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? ", " : "", handle_types[i].name);
    return buf[0] ? buf : "none";
}

/* Check that `device` can make a pool that exports `type`. */
static crmm_status check_device(int device, const char *type_name, enum cudaMemAllocationHandleType type)
{
    int pools = 0;
    crmm_status st = crmm_cuda_status(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device),
                                      "async: cudaDeviceGetAttribute(cudaDevAttrMemoryPoolsSupported)");
    if (st != CRMM_OK)
        return st;
    if (!pools)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "async: device %d does not support memory pools (cudaMallocAsync); use the cuda or pool plugin",
                              device);
    if (type == cudaMemHandleTypeNone)
        return CRMM_OK;
    int supported = 0;
    st = crmm_cuda_status(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolSupportedHandleTypes, device),
                          "async: cudaDeviceGetAttribute(cudaDevAttrMemoryPoolSupportedHandleTypes)");
    if (st != CRMM_OK)
        return st;
    if (!(supported & (int)type)) {
        char names[64];
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "async: export_handle_type %s is not supported by device %d (it supports: %s)",
                              type_name, device, handle_type_names(supported, names, sizeof names));
    }
    return CRMM_OK;
}

/* Allocate `bytes` and free them again, so the pool keeps them (RMM's initial_pool_size). */
static crmm_status prime(async_resource *a, uint64_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaMallocFromPoolAsync(&p, (size_t)bytes, a->pool, NULL);
    if (e != cudaSuccess) {
        cudaGetLastError();
        crmm_cuda_status(e, "cudaMallocFromPoolAsync");
        char sz[32];
        return crmm_error_add_context("async: initial_pool_size %s", crmm_format_size(bytes, sz, sizeof sz));
    }
    crmm_status st = crmm_cuda_status(cudaFreeAsync(p, NULL), "async: cudaFreeAsync");
    if (st != CRMM_OK && cudaFree(p) != cudaSuccess) /* else the pool would outlive its destroy */
        cudaGetLastError();
    return st;
}

/* The parameters, as crmm_params_parse fills them from async_params; a size not given keeps the value set in create. */
typedef struct async_config {
    uint64_t initial_pool_size;
    uint64_t release_threshold;
    int export_handle_type; /* index in handle_types, as in the row's choices */
    bool serialize_calls;
    bool enable_ipc;
    bool enable_fabric;
} async_config;

/* The rule between the handle parameters, for validate and create alike (*key: the one blamed).
 * enable_ipc and enable_fabric together are refused, although RMM ORs them into one pool
 * (docs/ipc.md says why). */
static crmm_status handle_choice_rule(bool enable_ipc, bool enable_fabric, int export_handle_type, const char **key)
{
    if ((enable_ipc || enable_fabric) && export_handle_type != 0) {
        *key = "export_handle_type";
        return crmm_set_error(CRMM_ERROR_CONFIG, "async: give either export_handle_type or enable_ipc/enable_fabric, not both");
    }
    if (enable_ipc && enable_fabric) {
        *key = "enable_fabric";
        return crmm_set_error(CRMM_ERROR_CONFIG, "async: enable_ipc and enable_fabric cannot both be true (one handle type per pool)");
    }
    return CRMM_OK;
}

/* crmm_plugin.validate: the handle rule, so that check-config refuses what create would. */
static crmm_status async_validate(const crmm_params *params, bool host_memory, const char **key)
{
    (void)host_memory;
    bool ipc = false, fabric = false;
    int type = 0;
    if (crmm_params_get_bool(params, "enable_ipc", &ipc) != CRMM_OK ||
        crmm_params_get_bool(params, "enable_fabric", &fabric) != CRMM_OK ||
        crmm_params_get_enum(params, "export_handle_type", &type) != CRMM_OK)
        return CRMM_OK; /* a value that does not parse is the parser's error, named by it */
    return handle_choice_rule(ipc, fabric, type, key);
}

static crmm_status async_create(const crmm_params *params, crmm_resource *upstream, crmm_resource **out)
{
    (void)upstream;
    int device;
    crmm_status st = device_check_resolve(params, "async", &device);
    if (st != CRMM_OK)
        return st;

    /* not given: no priming, and the pool keeps everything at synchronization */
    async_config cfg = {.initial_pool_size = 0, .release_threshold = UINT64_MAX};
    if ((st = crmm_params_parse(params, &cfg)) != CRMM_OK)
        return st;
    const char *key;
    if ((st = handle_choice_rule(cfg.enable_ipc, cfg.enable_fabric, cfg.export_handle_type, &key)) != CRMM_OK)
        return st;
    int chosen = cfg.enable_ipc ? 1 : cfg.enable_fabric ? 2 : cfg.export_handle_type;
    const char *type_name = handle_types[chosen].name;
    enum cudaMemAllocationHandleType type = handle_types[chosen].type;
    if ((st = check_device(device, type_name, type)) != CRMM_OK)
        return st;

    async_resource *a = calloc(1, sizeof *a);
    if (!a)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "async: malloc failed");
    crmm_device_guard g;
    if ((st = crmm_cuda_device_enter(device, &g)) != CRMM_OK) {
        free(a);
        return st;
    }
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = type;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    st = crmm_cuda_status(cudaMemPoolCreate(&a->pool, &props), "cudaMemPoolCreate");
    if (st != CRMM_OK) {
        crmm_cuda_device_restore(&g);
        free(a);
        return crmm_error_add_context("async: device %d, export_handle_type %s", device, type_name);
    }
    uint64_t release = cfg.release_threshold;
    st = crmm_cuda_status(cudaMemPoolSetAttribute(a->pool, cudaMemPoolAttrReleaseThreshold, &release),
                          "async: cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)");
    a->export_type = type;
    a->pool_fd = -1;
    if (st == CRMM_OK && type == cudaMemHandleTypePosixFileDescriptor)
        st = async_export_pool(a);
    if (st == CRMM_OK && cfg.initial_pool_size > 0)
        st = prime(a, cfg.initial_pool_size);
    crmm_cuda_device_restore(&g);
    if (st != CRMM_OK) {
        if (a->pool_fd >= 0)
            close(a->pool_fd);
        if (cudaMemPoolDestroy(a->pool) != cudaSuccess)
            cudaGetLastError(); /* the create's own failure is what the caller hears of */
        free(a);
        return st;
    }
    a->serialize = cfg.serialize_calls;
    pthread_once(&fork_hook_once, install_fork_hook);
    a->forks = forks;
    crmm_resource_init(&a->base, &async_ops, "async", CRMM_RESOURCE_DEVICE_ACCESSIBLE, device, NULL);
    *out = &a->base;
    return CRMM_OK;
}

static const crmm_param async_params[] = {
    {.key = "initial_pool_size", .type = CRMM_PARAM_SIZE,
     .help = "when given, the pool is primed with this much at create",
     .offset = offsetof(async_config, initial_pool_size)},
    {.key = "release_threshold", .type = CRMM_PARAM_SIZE,
     .help = "bytes the pool keeps at synchronization (default: all of it)",
     .offset = offsetof(async_config, release_threshold)},
    {.key = "export_handle_type", .type = CRMM_PARAM_ENUM, .default_value = "none",
     .help = "make allocations exportable to other processes",
     .offset = offsetof(async_config, export_handle_type), .choices = "none|posix_fd|fabric"},
    {.key = "serialize_calls", .type = CRMM_PARAM_BOOL, .default_value = "true",
     .help = "let one thread at a time into the driver (faster when threads contend)",
     .offset = offsetof(async_config, serialize_calls)},
    {.key = "enable_ipc", .type = CRMM_PARAM_BOOL, .default_value = "false",
     .help = "RMM's enable_ipc: export_handle_type = posix_fd (share allocations with crmm_ipc_export)",
     .offset = offsetof(async_config, enable_ipc)},
    {.key = "enable_fabric", .type = CRMM_PARAM_BOOL, .default_value = "false",
     .help = "RMM's enable_fabric: export_handle_type = fabric",
     .offset = offsetof(async_config, enable_fabric)},
    {NULL},
};

PLUGIN_DESCRIPTOR(.name = "async", .upstream = CRMM_UPSTREAM_NONE, .params = async_params,
                  .config_size = sizeof(async_config), .validate = async_validate, .create = async_create,
                  .description = "cudaMallocFromPoolAsync on a private cudaMemPool (RMM cuda_async_memory_resource)")
