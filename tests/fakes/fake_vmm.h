/* fake_vmm.h — a scripted CUDA driver virtual memory API (and the few runtime calls an
 * expandable pool makes), for programs that run the pool without a GPU (linked with
 * -export-dynamic, so the pool's driver look-ups land in fake_vmm.c). "Device memory" is host
 * memory: a reservation is an inaccessible mmap range, cuMemMap/cuMemSetAccess make pages readable
 * and writable, cuMemUnmap makes them inaccessible again and drops their content, so a block the
 * pool hands out over a page it did not map crashes the program when written. What real CUDA
 * refuses is refused (unmapping what is not mapped or not where a mapping starts, mapping over a
 * mapping, freeing a range that still has mappings); as in real CUDA an allocation may be mapped
 * at several addresses, and one released while mapped is held until its last mapping goes. Every
 * call is counted; physical memory can be limited. Besides the pool's reservation a few more may
 * be live (an import maps into one). cudaStreamQuery answers as streams_busy says, cudaEventQuery
 * as events_busy does.
 *
 * CUDA IPC: an allocation made exportable as POSIX file descriptors exports as a plain file that
 * names it ("fake_vmm ID SIZE"); importing it gives a new handle for the same allocation, which may
 * be released while mapped (the mapping holds it); its pages are fresh (the content is not shared). */
#ifndef CRMM_TESTS_FAKE_VMM_H
#define CRMM_TESTS_FAKE_VMM_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include <crmm/resource.h>

typedef struct fake_vmm_state {
    int lookups_fail;            /* the driver lacks the virtual memory API */
    int vmm_unsupported;         /* the device says it does not support it */
    size_t physical_limit;       /* bytes cuMemCreate may hold at once (0: no limit) */
    size_t physical;             /* bytes held by live allocations */
    size_t physical_peak;
    int creates, releases, maps, unmaps, set_access, reserves, frees, device_syncs;
    int address_free_calls;      /* cuMemAddressFree calls, refused ones included (frees: done) */
    int stream_queries;          /* cudaStreamQuery calls */
    int streams_busy;            /* cudaStreamQuery says every stream still has work queued */
    int events_busy;             /* cudaEventQuery says no event has completed */
    int event_records, event_queries; /* cudaEventRecord, cudaEventQuery calls */
    cudaStream_t event_stream;   /* the stream of the last cudaEventRecord */
    int upstream_calls;          /* calls the pool's upstream got (an expandable pool makes none) */
    int export_unsupported;      /* the device says it cannot export POSIX file descriptors */
    int exports, imports;        /* cuMemExportToShareableHandle, cuMemImportFromShareableHandle */
    int imported_live;           /* imported handles still held (by a handle or a mapping) */
    int devices;                 /* devices cudaGetDeviceCount reports (0: one); cuMemSetAccess
                                  * takes any of them */
    int device;                  /* the current device (cudaGetDevice, cudaSetDevice) */
    uintptr_t range;             /* the pool's reservation (the first made), 0: none */
    size_t range_size;
    /* faults: when n > 0, the nth such call from now fails (once), with *_error (0: a default:
     * CUDA_ERROR_OUT_OF_MEMORY for cuMemMap, CUDA_ERROR_UNKNOWN for the others) */
    int map_fails_in, set_access_fails_in, unmap_fails_in, release_fails_in;
    int map_error, set_access_error, unmap_error, release_error;
    int device_syncs_fail;       /* the next this many cudaDeviceSynchronize calls fail (cudaErrorUnknown) */
} fake_vmm_state;

/* The counters and settings; tests read and set them directly. */
extern fake_vmm_state fake_vmm;

/* What orders stream work, as the scripted runtime sees it: a device synchronization, a stream
 * found idle (synchronized, or a query that says so), an event recorded on a stream, a stream made
 * to wait for the last event recorded, an event found complete. */
enum { FAKE_ORDER_DEVICE_SYNC, FAKE_ORDER_STREAM_SYNC, FAKE_ORDER_RECORD, FAKE_ORDER_WAIT, FAKE_ORDER_EVENT_DONE };
/* When set, called at each of them with the stream concerned (NULL for the device and an event),
 * on the calling thread: a test's model of which work is ordered after which. */
extern void (*fake_vmm_order_hook)(int what, cudaStream_t s);

/* Forget everything (counters, settings, handles; a live reservation is left to the process)
 * and set the device's allocation granularity (`page`, a power of two) and its memory, as
 * cuMemGetAllocationGranularity and cudaMemGetInfo report them. */
void fake_vmm_reset(size_t page, size_t device_memory);

/* A new resource (one reference, the caller's) that says it is device memory of device 0 with no
 * upstream of its own, backed by host memory; its calls are counted in fake_vmm.upstream_calls.
 * NULL when malloc fails. */
crmm_resource *fake_vmm_device_upstream(void);

/* Create a pool with "expandable=true" and `params` (more "key=value" words) over an upstream
 * that says it is device memory of device 0 with no upstream of its own (so the pool may be
 * expandable; backed by host memory, it counts its calls in fake_vmm.upstream_calls). The pool
 * holds the only reference to the upstream. Errors: crmm_resource_create's. */
crmm_status fake_vmm_expandable_pool(const char *params, crmm_resource **out);

/* The allocation id an exported file names, and its size when `size` is not NULL; 0 for a file
 * that names none. */
int fake_vmm_exported_handle(int fd, size_t *size);

/* The allocation mapped over the page of the pool's range that holds addr, or 0. */
int fake_vmm_handle_at(uintptr_t addr);

/* Bytes of the allocations mapped now. */
size_t fake_vmm_mapped_bytes(void);

#endif
