/* arena_stream_order.c — how the arena keeps the stream-ordered contract (DESIGN §2) for device
 * memory; over host memory it makes no CUDA call at all.
 *
 * Memory freed on stream S may be reused on S at once, and on another stream only after that
 * stream is ordered behind the free. Thread arenas are per (thread, stream), so a block freed into
 * the arena it came from is reused on the same stream only. Whenever memory leaves such an arena,
 * the host waits until it is idle, which makes it safe for every stream:
 *  - a small block freed on another stream than its arena's (or by another thread): the free
 *    waits for its stream (cudaStreamSynchronize) before the block is marked free — as RMM's
 *    arena does when a block goes back to another arena;
 *  - a large block (served by the global arena): the free waits for its stream before the span
 *    goes back — as RMM's global arena does;
 *  - superblocks taken from thread arenas (defragment, trim, thread exit): one
 *    cudaDeviceSynchronize after taking them and before they go back — as RMM's defragment.
 * Hence every free span of the global arena and every free block of a detached superblock can go
 * to any stream with no CUDA call. The alternative, events recorded at free time and waited on at
 * reuse, would keep the host from blocking but needs an event per span that survives coalescing;
 * the waits above are on rare paths only, and the fast path makes no CUDA call either way. */
#include "config.h"
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include <crmm/log.h>
#include "arena_resource.h"

crmm_status arena_stream_synchronize(arena_resource *r, crmm_cuda_stream_t stream)
{
    if (!r->uses_cuda || crmm_process_exiting())
        return CRMM_OK;
    crmm_device_guard g;
    crmm_status st = crmm_cuda_device_enter(r->base.device, &g);
    if (st != CRMM_OK)
        return crmm_error_add_context("%s", arena_who(r));
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    crmm_cuda_device_restore(&g);
    if (e != cudaSuccess) {
        crmm_cuda_status(e, "cudaStreamSynchronize");
        return crmm_error_add_context("%s: freeing on stream %p", arena_who(r), (void *)stream);
    }
    return CRMM_OK;
}

void arena_device_synchronize(arena_resource *r)
{
    if (!r->uses_cuda || crmm_process_exiting())
        return;
    crmm_device_guard g;
    if (crmm_cuda_device_enter(r->base.device, &g) != CRMM_OK) {
        crmm_log(CRMM_LOG_ERROR, "%s: cannot make device %d current: %s", arena_who(r), r->base.device, crmm_last_error());
        return;
    }
    cudaError_t e = cudaDeviceSynchronize();
    crmm_cuda_device_restore(&g);
    if (e != cudaSuccess)
        crmm_log(CRMM_LOG_ERROR, "%s: cudaDeviceSynchronize: %s", arena_who(r), cudaGetErrorString(e));
}
