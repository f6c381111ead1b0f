/* capture_check.h — what a plugin needs to stay legal on a stream under CUDA graph capture
 * (docs/cuda-graphs.md): the gate that keeps a program that never captures from paying any query,
 * whether a stream is being captured (and into which graph), the error of a plugin that cannot
 * serve a captured stream, the relaxed capture mode around a call that the global mode forbids
 * (cudaMalloc, cudaFree, cudaHostAlloc, ... while any thread captures), and a per-thread mark
 * that tells a plugin's waits (device or stream synchronization) to fail instead of waiting. */
#ifndef CRMM_PLUGINS_CAPTURE_CHECK_H
#define CRMM_PLUGINS_CAPTURE_CHECK_H

#include <stdbool.h>
#include <crmm/resource.h>

/* When a resource asks CUDA whether a stream is captured: once the process enabled capture
 * (crmm_graph_capture_enable), always, or never. */
typedef enum capture_check_when { CAPTURE_CHECK_AUTO, CAPTURE_CHECK_ALWAYS, CAPTURE_CHECK_NEVER } capture_check_when;

/* The byte a resource tests on every allocate and free before asking anything: the process
 * switch for AUTO, a constant otherwise. Test it with capture_check_gate_open (one load and one
 * predictable branch while it is off). */
const bool *capture_check_gate(capture_check_when when);

static inline bool capture_check_gate_open(const bool *gate)
{
    return __builtin_expect(__atomic_load_n(gate, __ATOMIC_RELAXED), 0);
}

/* A capture under way on a stream, as cudaStreamGetCaptureInfo tells it. */
typedef struct capture_check_info {
    unsigned long long id;     /* the capture sequence, unique in the process */
    void *graph;               /* cudaGraph_t being built */
    crmm_cuda_stream_t stream; /* the stream asked about */
} capture_check_info;

/* Whether `stream` is being captured (status active), asked whatever the gate says: then *cap
 * describes the capture. One runtime query (cudaStreamIsCapturing; the capture's id and graph
 * only when it is); none for the legacy default stream (NULL or cudaStreamLegacy, which cannot be
 * captured) or once the process is exiting. A query CUDA refuses, or a capture invalidated
 * already, counts as "not capturing" (its error is cleared): that graph can never run. */
bool capture_check_query(crmm_cuda_stream_t stream, capture_check_info *cap);

/* capture_check_query behind the process switch (the gate of CAPTURE_CHECK_AUTO). */
bool capture_check_stream(crmm_cuda_stream_t stream, capture_check_info *cap);

/* Whether `stream` is being captured, behind the process switch (capture_check_stream without
 * the capture's description). */
bool capture_check_active(crmm_cuda_stream_t stream);

/* CRMM_ERROR_UNSUPPORTED with "<label>: cannot <what> on stream S while it is captured into a
 * CUDA graph (<why>)". */
crmm_status capture_check_refuse(const char *label, const char *what, crmm_cuda_stream_t stream, const char *why);

/* Set the calling thread's capture mode to relaxed, the previous one in *saved;
 * capture_check_restore_mode puts it back. */
void capture_check_relax_mode(int *saved);
void capture_check_restore_mode(int saved);

/* Mark the calling thread as serving a captured stream (capture_check_enter_capture; leave with
 * capture_check_leave_capture, which restores the previous mark): a plugin's wait for the device
 * or a stream asks capture_check_no_wait first and fails instead (capture_check_wait_refused). */
bool capture_check_enter_capture(void);
void capture_check_leave_capture(bool previous);
bool capture_check_no_wait(void);

/* CRMM_ERROR_OUT_OF_MEMORY with "<label>: <what> needs a wait for the device, which CUDA forbids
 * while a stream is captured into a graph", for a wait refused under capture_check_no_wait. */
crmm_status capture_check_wait_refused(const char *label, const char *what);

#endif
