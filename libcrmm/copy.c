/* copy.c — the copy helpers between host and device pointers (RMM's copy_device_to_ptr,
 * copy_host_to_ptr, copy_ptr_to_host).
 *
 * Each is one cudaMemcpyAsync (cudaMemcpyDefault: unified addressing finds the direction, so
 * pinned, managed and peer memory work too) on the given stream, followed by a synchronization
 * of that stream when it is a default stream — RMM's rule: on the default stream the copy is done
 * when the call returns; on any other stream it is asynchronous. Arguments are checked before
 * any CUDA call. */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include <crmm/device_buffer.h>

static crmm_status copy_on_stream(void *dst, const void *src, size_t count, crmm_stream *stream, const char *who)
{
    if (count == 0)
        return CRMM_OK;
    if (!src || !dst)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "%s: %s pointer is NULL with count %zu", who,
                              src ? "destination" : "source", count);
    if (crmm_process_exiting())
        return crmm_set_error(CRMM_ERROR_STATE, "%s: the process is exiting", who);
    cudaStream_t s = crmm_stream_handle(stream);
    cudaError_t e = cudaMemcpyAsync(dst, src, count, cudaMemcpyDefault, s);
    const char *call = "cudaMemcpyAsync";
    if (e == cudaSuccess && crmm_stream_is_default(stream)) {
        e = cudaStreamSynchronize(s);
        call = "cudaStreamSynchronize";
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        crmm_cuda_status(e, call);
        return crmm_error_add_context("%s", who);
    }
    return CRMM_OK;
}

crmm_status crmm_copy_device_to_ptr(const void *d_src, void *d_dst, size_t count, crmm_stream *stream)
{
    return copy_on_stream(d_dst, d_src, count, stream, "copy_device_to_ptr");
}

crmm_status crmm_copy_host_to_ptr(const void *host, size_t count, void *d_dst, crmm_stream *stream)
{
    return copy_on_stream(d_dst, host, count, stream, "copy_host_to_ptr");
}

crmm_status crmm_copy_ptr_to_host(const void *d_src, void *host, size_t count, crmm_stream *stream)
{
    return copy_on_stream(host, d_src, count, stream, "copy_ptr_to_host");
}
