/* arena_stream_order.c — how the arena keeps the stream-ordered contract (docs/contracts.md) for device
 * memory; over host memory it makes no CUDA call at all and nothing is tagged.
 *
 * Memory freed on stream S may be reused on S at once, and on another stream T only after T is
 * ordered behind the free. The only stream the arena may pass to CUDA is the caller's: S may have
 * been destroyed since it freed (legal, and CUDA hands its handle to the next stream created),
 * and any CUDA call with a destroyed handle is undefined (cudaStreamGetId on one can crash).
 * So the arena orders T behind other streams with cudaDeviceSynchronize, which names no stream.
 *
 *  - Large blocks (served by the global arena): a free on S makes the pages free at once, with no
 *    CUDA call, tagged with S and the shard's epoch (arena_global.h). S means its handle, except
 *    that NULL and cudaStreamLegacy are one stream, and cudaStreamPerThread, a different stream on
 *    every thread, is told apart by the freeing thread's serial number. An allocation on S takes
 *    S's spans as they are; an allocation on T takes spans tagged for another stream (or "mixed",
 *    where neighbours freed on different streams merged) only when no shard offers a fit that
 *    needs no wait, and then after one cudaDeviceSynchronize, made without holding a lock
 *    (arena_global_synchronize). Each shard's epoch moves on before that wait and its `synced`
 *    mark after it, so every tag made before the wait is void from then on: a comparison of two
 *    numbers, no list is walked. Two rare paths synchronize under locks (documented in
 *    arena_global.c): a span tagged again in the moment between the wait and the second look, and
 *    runs of free pages across shards. So a thread that allocates and frees on its own stream
 *    makes no CUDA call for a large block, and where each thread has its own stream and home
 *    shard spans of other streams are rare (arena_global.c looks past a foreign first fit).
 *  - Small blocks, thread arenas: they are per (thread, stream), so a block freed into the arena
 *    it came from is reused on the same stream only. A small block freed on another stream than
 *    its arena's (or by another thread) waits for the freeing stream (cudaStreamSynchronize; that
 *    stream is alive, the caller is using it) before the block is marked free — as RMM's arena
 *    does. That is not a fast path (bench sets B and D free on the allocating stream), and it
 *    keeps every free block of a superblock safe for any stream, so superblocks need no tags:
 *    one that goes back to the global arena after such frees is untagged.
 *  - Superblocks taken from thread arenas (defragment, trim, thread exit): one
 *    arena_global_synchronize after taking them and before they go back, as RMM's defragment;
 *    that also voids every tag in the global arena. If it fails they go back tagged "mixed".
 *  - Destroy waits for the device before the memory goes back upstream.
 *
 * The caveat (as the pool's, and RMM's): the arena cannot tell that a handle was destroyed and
 * given to a new stream. A span (or a thread arena's block) freed on S with work still pending,
 * then S destroyed and a new stream created with S's handle: an allocation on the new stream may
 * get that memory without a wait. Synchronize a stream before destroying it. Allocating on
 * another stream T is always safe.
 *
 * Events recorded at free time and waited on at reuse would keep the host from blocking but
 * record on S at every free (~300 ns each, RMM's way) and must outlive S; the device
 * synchronization is paid only when memory really moves between streams. */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include "../common/capture_check.h"
#include "../common/thread_serial.h"
#include <crmm/log.h>
#include "arena_resource.h"

const arena_stream_id *arena_stream_of(const arena_resource *r, crmm_cuda_stream_t stream, arena_stream_id *id)
{
    if (!r->uses_cuda)
        return NULL;
    id->thread = 0;
    if (stream == CRMM_CUDA_STREAM_PER_THREAD) {
        id->thread = thread_serial();
    } else if (stream == (crmm_cuda_stream_t)cudaStreamLegacy) {
        stream = NULL;
    }
    id->handle = (uintptr_t)stream;
    return id;
}

crmm_status arena_stream_synchronize(arena_resource *r, crmm_cuda_stream_t stream)
{
    if (!r->uses_cuda || crmm_process_exiting())
        return CRMM_OK;
    if (capture_check_no_wait()) /* serving a stream under capture: refuse, never wait */
        return capture_check_wait_refused(arena_who(r), "freeing a block on another stream");
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

/* The global arena's device_sync: the resource's device current, cudaDeviceSynchronize. */
static crmm_status device_sync(void *arg)
{
    arena_resource *r = arg;
    if (crmm_process_exiting())
        return CRMM_OK;
    if (capture_check_no_wait()) /* serving a stream under capture: refuse, never wait */
        return capture_check_wait_refused(arena_who(r), "reusing memory freed on other streams");
    crmm_device_guard g;
    crmm_status st = crmm_cuda_device_enter(r->base.device, &g);
    if (st != CRMM_OK)
        return crmm_error_add_context("%s", arena_who(r));
    cudaError_t e = cudaDeviceSynchronize();
    crmm_cuda_device_restore(&g);
    if (e != cudaSuccess) {
        crmm_cuda_status(e, "cudaDeviceSynchronize");
        return crmm_error_add_context("%s: waiting for device %d", arena_who(r), r->base.device);
    }
    return CRMM_OK;
}

void arena_streams_init(arena_resource *r)
{
    if (r->uses_cuda)
        arena_global_use_streams(&r->global, device_sync, r);
}

crmm_status arena_device_synchronize(arena_resource *r)
{
    crmm_status st = arena_global_synchronize(&r->global);
    if (st != CRMM_OK)
        crmm_log(CRMM_LOG_ERROR, "%s", crmm_last_error());
    return st;
}
