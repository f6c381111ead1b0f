/* capture_check.c — see capture_check.h. */
#include "build_config.h"
#include <cuda_runtime_api.h>
#include <crmm/cuda_support.h>
#include <crmm/error.h>
#include "capture_check.h"

static const bool always = true, never = false;
/* initial-exec: one byte of the static TLS block rather than a dynamically allocated one, since
 * every plugin that compiles this file is dlopen'ed. It costs no __tls_get_addr call, and
 * LeakSanitizer (gcc 12) crashed scanning the dynamic TLS vector of a process whose pool plugin
 * had this variable dynamically allocated. */
static _Thread_local bool serving_capture __attribute__((tls_model("initial-exec")));

const bool *capture_check_gate(capture_check_when when)
{
    switch (when) {
    case CAPTURE_CHECK_ALWAYS: return &always;
    case CAPTURE_CHECK_NEVER: return &never;
    default: return crmm_graph_capture_switch();
    }
}

bool capture_check_query(crmm_cuda_stream_t stream, capture_check_info *cap)
{
    if (stream == NULL || stream == (crmm_cuda_stream_t)cudaStreamLegacy || crmm_process_exiting())
        return false;
    /* the cheaper query on every call; the capture's id and graph only when there is one */
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &status) != cudaSuccess) {
        cudaGetLastError(); /* a stream CUDA does not know is not capturing; the caller finds out */
        return false;
    }
    if (__builtin_expect(status != cudaStreamCaptureStatusActive, 1))
        return false;
    cudaGraph_t graph = NULL;
    if (cudaStreamGetCaptureInfo((cudaStream_t)stream, &status, &cap->id, &graph, NULL, NULL, NULL) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    cap->graph = graph;
    cap->stream = stream;
    return status == cudaStreamCaptureStatusActive;
}

bool capture_check_stream(crmm_cuda_stream_t stream, capture_check_info *cap)
{
    return capture_check_gate_open(crmm_graph_capture_switch()) && capture_check_query(stream, cap);
}

bool capture_check_active(crmm_cuda_stream_t stream)
{
    capture_check_info cap;
    return capture_check_stream(stream, &cap);
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

bool capture_check_enter_capture(void)
{
    bool previous = serving_capture;
    serving_capture = true;
    return previous;
}

void capture_check_leave_capture(bool previous) { serving_capture = previous; }

bool capture_check_no_wait(void) { return serving_capture; }

crmm_status capture_check_wait_refused(const char *label, const char *what)
{
    return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY,
                          "%s: %s needs a wait for the device, which CUDA forbids while a stream is captured into a "
                          "CUDA graph (captured into a CUDA graph: give the resource more memory before the capture)",
                          label, what);
}
