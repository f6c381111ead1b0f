/* capture_check.h — what a plugin needs to stay legal on a stream under CUDA graph capture
 * (docs/cuda-graphs.md): whether a stream is being captured, the error of a plugin that cannot
 * serve a captured stream, and the relaxed capture mode around a call that the global mode
 * forbids (cudaMalloc, cudaFree, cudaHostAlloc, ... while any thread captures). */
#ifndef CRMM_PLUGINS_CAPTURE_CHECK_H
#define CRMM_PLUGINS_CAPTURE_CHECK_H

#include <stdbool.h>
#include <crmm/resource.h>

/* Whether `stream` is being captured into a graph: one runtime query (cudaStreamIsCapturing),
 * none before crmm_graph_capture_enable(true), none for the legacy default stream (NULL or cudaStreamLegacy, which cannot be captured) or once
 * the process is exiting. A query CUDA refuses counts as "not capturing" (its error is cleared). */
bool capture_check_active(crmm_cuda_stream_t stream);

/* CRMM_ERROR_UNSUPPORTED with "<label>: cannot <what> on stream S while it is captured into a
 * CUDA graph (<why>)". */
crmm_status capture_check_refuse(const char *label, const char *what, crmm_cuda_stream_t stream, const char *why);

/* Set the calling thread's capture mode to relaxed, the previous one in *saved;
 * capture_check_restore_mode puts it back. */
void capture_check_relax_mode(int *saved);
void capture_check_restore_mode(int saved);

#endif
