/* crmm/cuda_support.h — small CUDA helpers that the core and plugins share.
 *
 * These take and return plain ints so that callers need not include the CUDA headers here. */
#ifndef CRMM_CUDA_SUPPORT_H
#define CRMM_CUDA_SUPPORT_H

#include <crmm/export.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <crmm/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Turn a cudaError_t from `call` into a status and an error message:
 * cudaSuccess → CRMM_OK; cudaErrorMemoryAllocation → CRMM_ERROR_OUT_OF_MEMORY; anything else →
 * CRMM_ERROR_CUDA ("CUDA error: cudaMalloc: invalid argument (cudaErrorInvalidValue)").
 * cudaErrorCudartUnloading → CRMM_ERROR_STATE, and crmm_process_exiting() is true from then on.
 * On an error it also clears the thread's last CUDA error (cudaGetLastError), since the error
 * is now reported through crmm; not for cudaErrorCudartUnloading, nor once the process is exiting
 * (no CUDA call is made then). */
CRMM_API crmm_status crmm_cuda_status(int cuda_error, const char *call);

/* Turn a CUDA driver result (a CUresult) from `call` into a status and an error message:
 * CUDA_SUCCESS → CRMM_OK; CUDA_ERROR_OUT_OF_MEMORY → CRMM_ERROR_OUT_OF_MEMORY; anything else →
 * CRMM_ERROR_CUDA ("CUDA driver: cuMemMap: invalid argument (error 1)"; "unknown error" where the
 * driver has no cuGetErrorString). */
CRMM_API crmm_status crmm_cuda_driver_status(int cu_result, const char *call);

/* One CUDA driver function to look up: its name ("cuMemCreate") and where its address goes. */
typedef struct crmm_driver_function {
    const char *name;
    void **fn;
} crmm_driver_function;

/* Looks up the `count` driver functions of `table` through cudaGetDriverEntryPointByVersion, for
 * the signatures of CUDA 12.0 (so that the caller links only the runtime, and a test program can
 * supply a scripted driver). Each found is stored, each missing one set to NULL. Returns true when
 * all were found; else false, with a sentence naming the first missing one in `why` (`why_size`
 * bytes, may be NULL): "the CUDA driver has no cuMemCreate (driver too old, or none)". Clears the
 * runtime's last error where the lookup itself failed. A NULL table with count > 0, or an entry
 * with a NULL name or fn, is refused the same way: false, with a sentence saying so (an entry's fn,
 * where it has one, is set to NULL). */
CRMM_API bool crmm_cuda_driver_lookup(const crmm_driver_function *table, size_t count, char *why, size_t why_size);

/* True once the process has started to exit (atexit ran or libcrmm is being unloaded). From
 * then on resources must not call CUDA: they leak instead of freeing. */
CRMM_API bool crmm_process_exiting(void);

/* Call after a first successful CUDA call: registers the exit hook behind the CUDA runtime's
 * own, so that crmm_process_exiting() turns true before the runtime tears down. Cheap to repeat. */
CRMM_API void crmm_note_cuda_initialized(void);

/* CUDA graph capture (docs/cuda-graphs.md). Asking CUDA whether a stream is being captured costs
 * a driver call per allocate and free, more than a pool's whole fast path, and a program that never
 * captures need not pay it: crmm asks only once the process says that streams may be captured.
 * crmm_graph_capture_enable(true) says so (the PyTorch, CuPy and Numba integrations call it; a C
 * program that captures calls it before its first capture); from then on the pool (graphs = auto),
 * arena, fixed_size and prefetch check each stream they are given. A pool with graphs = on checks
 * whatever this says, one with graphs = off never does. Thread-safe; never fails. */
CRMM_API void crmm_graph_capture_enable(bool enable);
/* Whether crmm_graph_capture_enable(true) is in force (one atomic load). */
CRMM_API bool crmm_graph_capture_enabled(void);
/* The address of the byte crmm_graph_capture_enable sets (non-zero: on), for allocators that test
 * the switch on every call without a function call: read it with a relaxed atomic load
 * (__atomic_load_n). Never NULL; never fails. */
CRMM_API const bool *crmm_graph_capture_switch(void);

/* The current device ordinal: the current context's device (the driver's cuCtxGetDevice, or
 * cudaGetDevice where no context is current) once a device has been found; the first call also
 * counts the devices, so that a missing driver or device is named. CRMM_ERROR_CUDA when there is
 * no usable device, CRMM_ERROR_STATE once the process is exiting or when the CUDA runtime is
 * unloading (no CUDA call made then), CRMM_ERROR_INVALID_ARGUMENT for NULL. */
CRMM_API crmm_status crmm_cuda_current_device(int *device);
/* Number of CUDA devices (0 with CRMM_ERROR_CUDA and the reason when there are none;
 * CRMM_ERROR_STATE, and 0, once the process is exiting or when the CUDA runtime is unloading;
 * CRMM_ERROR_INVALID_ARGUMENT for NULL). */
CRMM_API crmm_status crmm_cuda_device_count(int *count);
/* Free and total memory of `device` (made current for the call, then restored); a NULL
 * free_bytes or total_bytes is not written. Errors: CRMM_ERROR_INVALID_ARGUMENT (no such device),
 * CRMM_ERROR_CUDA (no usable device, or a failed call, named), CRMM_ERROR_STATE (the process is
 * exiting, or the CUDA runtime is unloading). */
CRMM_API crmm_status crmm_cuda_device_memory(int device, uint64_t *free_bytes, uint64_t *total_bytes);

/* Makes `device` current and remembers the previous one; restore with crmm_cuda_device_restore.
 * device < 0 does nothing. Errors: CRMM_ERROR_INVALID_ARGUMENT for a NULL guard (checked first),
 * CRMM_ERROR_CUDA when there is no usable device or cudaSetDevice fails, CRMM_ERROR_STATE once
 * the process is exiting (no CUDA call made) or when the CUDA runtime is unloading.
 * crmm_cuda_device_restore of a NULL guard does nothing; a restore CUDA refuses is logged. */
typedef struct crmm_device_guard { int previous; int changed; } crmm_device_guard;
CRMM_API crmm_status crmm_cuda_device_enter(int device, crmm_device_guard *guard);
CRMM_API void crmm_cuda_device_restore(crmm_device_guard *guard);

#ifdef __cplusplus
}
#endif
#endif
