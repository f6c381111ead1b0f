/* fake_vmm.h — a scripted CUDA driver virtual memory API (and the few runtime calls an
 * expandable pool makes) for programs that run the pool without a GPU: check_pool_expandable and
 * the replay harness pool_expandable_replay.
 *
 * fake_vmm.c defines cudaGetDriverEntryPointByVersion, so the pool's driver look-ups land there
 * when the program is linked with -export-dynamic, and hands out a driver that backs "device
 * memory" with host memory: a reservation is an inaccessible mmap range, cuMemMap/cuMemSetAccess
 * make pages readable and writable, cuMemUnmap makes them inaccessible again (and drops their
 * content). A block the pool hands out over a page it did not map crashes the program when
 * written, and the driver refuses what real CUDA refuses (unmapping what is not mapped, releasing
 * a mapped allocation, freeing a range that still has mappings). Every call is counted, and
 * physical memory can be limited. It also defines cudaDeviceSynchronize (counted), device and
 * memory queries, and no-op stream and event calls, and gives a pool an upstream that says it is
 * device memory. Only one reservation may be live at once. */
#ifndef CRMM_TESTS_FAKE_VMM_H
#define CRMM_TESTS_FAKE_VMM_H

#include <stddef.h>
#include <stdint.h>
#include <crmm/resource.h>

typedef struct fake_vmm_state {
    int lookups_fail;            /* the driver lacks the virtual memory API */
    int vmm_unsupported;         /* the device says it does not support it */
    size_t physical_limit;       /* bytes cuMemCreate may hold at once (0: no limit) */
    size_t physical;             /* bytes held by live allocations */
    size_t physical_peak;
    int creates, releases, maps, unmaps, set_access, reserves, frees, device_syncs;
    int upstream_calls;          /* calls the pool's upstream got (an expandable pool makes none) */
    uintptr_t range;             /* the one live reservation, 0: none */
    size_t range_size;
} fake_vmm_state;

/* The counters and settings; tests read and set them directly. */
extern fake_vmm_state fake_vmm;

/* Forget everything (counters, settings, handles; a live reservation is left to the process)
 * and set the device's allocation granularity (`page`, a power of two) and its memory, as
 * cuMemGetAllocationGranularity and cudaMemGetInfo report them. */
void fake_vmm_reset(size_t page, size_t device_memory);

/* Create a pool with "expandable=true" and `params` (more "key=value" words) over an upstream
 * that says it is device memory of device 0 with no upstream of its own (so the pool may be
 * expandable; backed by host memory, it counts its calls in fake_vmm.upstream_calls). The pool
 * holds the only reference to the upstream. Errors: crmm_resource_create's. */
crmm_status fake_vmm_expandable_pool(const char *params, crmm_resource **out);

/* Bytes of the allocations mapped now. */
size_t fake_vmm_mapped_bytes(void);

#endif
