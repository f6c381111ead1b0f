/* crmm/torch.h — the allocator functions PyTorch loads from libcrmm.
 *
 * torch.cuda.memory.CUDAPluggableAllocator(path_to_libcrmm, "crmm_torch_allocate",
 * "crmm_torch_deallocate") makes every CUDA tensor's memory come from crmm (the Python package's
 * crmm.allocators.torch does this in one call). Each call uses the current crmm resource of the
 * device PyTorch names (crmm_get_per_device_resource_ref), with that device current during the
 * call, as RMM's PyTorch allocator does. The first call that allocates initialises crmm once with
 * crmm_init(NULL) ($CRMM_CONFIG, else the installed crmm.ini, else the built-in `cuda`) unless the
 * program initialised it already. Both functions are thread-safe.
 *
 * A pointer must be freed through the resource that allocated it: replace a device's resource
 * (crmm_set_per_device_resource) only while PyTorch holds no memory from it. */
#ifndef CRMM_TORCH_H
#define CRMM_TORCH_H

#include <crmm/export.h>
#include <stdbool.h>
#include <sys/types.h> /* ssize_t */
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Allocate `size` bytes for device `device` on `stream` (a cudaStream_t; NULL = the legacy
 * default stream) from the device's current resource. Returns NULL for size 0 (without touching
 * crmm), and NULL on any failure, which is reported because PyTorch passes no error on: a config
 * that cannot be loaded (on stderr, once, naming the file and how to fix it; every later call
 * returns NULL), and through crmm's log (stderr unless $CRMM_DEBUG_LOG_FILE says otherwise) a
 * negative size, a device that does not exist, out of memory and the resource's other errors, or
 * a call made after the process began to exit. PyTorch does not check the pointer: a failed
 * allocation shows up later as a CUDA error, with crmm's message before it. crmm's hooks for
 * PyTorch (crmm.allocators.torch.use_crmm()) allocate through crmm_torch_allocate_checked instead
 * and raise the failure in PyTorch, as torch.OutOfMemoryError when memory ran out. The first call
 * turns on crmm_graph_capture_enable(true) for the whole process (PyTorch captures streams), and
 * loads the config (crmm_init(NULL)) unless one is loaded. */
CRMM_API void *crmm_torch_allocate(ssize_t size, int device, crmm_cuda_stream_t stream);

/* crmm_torch_allocate with its error returned instead of logged: *ptr gets the memory (NULL for
 * size 0, with CRMM_OK). Errors: CRMM_ERROR_INVALID_ARGUMENT (ptr NULL, a negative size),
 * CRMM_ERROR_STATE (the process is exiting), the config's error when crmm cannot start (each call
 * repeats it), CRMM_ERROR_OUT_OF_MEMORY (the resource has no memory for it, or a memory fraction
 * refuses it), and the resource's other errors; the message names the size and the device. crmm's
 * hooks for PyTorch call this and raise torch.OutOfMemoryError (RuntimeError for the others), as
 * PyTorch's own allocator does. */
CRMM_API crmm_status crmm_torch_allocate_checked(ssize_t size, int device, crmm_cuda_stream_t stream, void **ptr);

/* Free `ptr` (from crmm_torch_allocate with the same size and device) on `stream`, through the
 * device's current resource. NULL: no-op. Once the process has begun to exit it does nothing at
 * all (no CUDA call; the memory goes with the process). A failure is reported through crmm's log;
 * the thread's last error is left as it was. */
CRMM_API void crmm_torch_deallocate(void *ptr, ssize_t size, int device, crmm_cuda_stream_t stream);

/* Record that `stream` uses `ptr` (from crmm_torch_allocate) too, as PyTorch's
 * tensor.record_stream(stream) does: when ptr is freed, the free's stream first waits
 * (cudaStreamWaitEvent) for the work queued on `stream` by then, so that the memory is handed out
 * again only after that work; where CUDA refuses the wait (a stream of another device, a capture)
 * the free waits for it on the host, and logs an error if even that fails. Recording the same
 * stream twice, or the stream ptr was allocated on, changes nothing. crmm's hooks for PyTorch
 * (crmm.allocators.torch.use_crmm()) pass record_stream here. Errors: CRMM_ERROR_INVALID_ARGUMENT
 * (ptr NULL), CRMM_ERROR_OUT_OF_MEMORY (no host memory for the record). */
CRMM_API crmm_status crmm_torch_record_stream(void *ptr, crmm_cuda_stream_t stream);

/* Whether crmm_torch_allocate has served an allocation on `device` in this process (false for a
 * number that is no device). */
CRMM_API bool crmm_torch_device_served(int device);

/* What torch.cuda.empty_cache() asks of an allocator: crmm_resource_trim on the current resource
 * of every device crmm_torch_allocate has served, with that device current, so that the free
 * memory each holds goes back to the device (a pool gives back its free pages; see the
 * resource's trim). Touches nothing before the first allocation. Every such device is trimmed
 * even when one fails; the first failure is returned, naming its device: the trim's error
 * (CRMM_ERROR_CUDA when the driver refused to give memory back, ...) or the device's
 * (CRMM_ERROR_CUDA, CRMM_ERROR_CONFIG when its resource cannot be made). */
CRMM_API crmm_status crmm_torch_empty_cache(void);

/* What torch.cuda.set_per_process_memory_fraction(fraction, device) asks of an allocator: from now
 * on an allocation through crmm_torch_allocate on `device` fails as out of memory when it would
 * leave the device's resource holding more than fraction × the device's total memory (what the
 * resource holds, CRMM_QUERY_BYTES_RESERVED, as PyTorch bounds what its allocator holds, cached
 * blocks included). An allocation that goes past it is given back, the resource trimmed (its free
 * memory returned to the device, as PyTorch frees its cached blocks first) and the request tried
 * once more; a request refused in the end is given back and the resource trimmed again. A request
 * is checked right after it is served, with the device's allocations under a fraction made one at
 * a time (as PyTorch's allocator holds its device's lock), so only that request can have passed
 * the limit, and only until it is given back. A new fraction replaces the old; 1 allows the whole
 * device. Errors: CRMM_ERROR_INVALID_ARGUMENT (a fraction outside [0, 1], no such
 * device), CRMM_ERROR_UNSUPPORTED (the device's resource does not say what it holds; give its pool a
 * maximum_size instead), CRMM_ERROR_CUDA (the device's memory could not be read), the config's
 * error when crmm cannot start. */
CRMM_API crmm_status crmm_torch_set_memory_fraction(double fraction, int device);

#ifdef __cplusplus
}
#endif
#endif
