/* capture_check.c — see capture_check.h. */
#include "config.h"
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include <crmm/error.h>
#include "capture_check.h"

bool capture_check_active(crmm_cuda_stream_t stream)
{
    if (!crmm_graph_capture_enabled() || stream == NULL || stream == (crmm_cuda_stream_t)cudaStreamLegacy ||
        crmm_process_exiting())
        return false;
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &status) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return status == cudaStreamCaptureStatusActive;
}

crmm_status capture_check_refuse(const char *label, const char *what, crmm_cuda_stream_t stream, const char *why)
{
    return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s: cannot %s on stream %p while it is captured into a CUDA graph (%s)",
                          label, what, (void *)stream, why);
}

void capture_check_relax_mode(int *saved)
{
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) {
        cudaGetLastError();
        mode = (enum cudaStreamCaptureMode)-1;
    }
    *saved = (int)mode;
}

void capture_check_restore_mode(int saved)
{
    if (saved < 0)
        return;
    enum cudaStreamCaptureMode mode = (enum cudaStreamCaptureMode)saved;
    if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess)
        cudaGetLastError();
}
