/* fake_capture.h — stream capture for the programs that script CUDA: a fake stream can be put
 * "under capture" into a fake graph, and every call that capture forbids is counted (and named)
 * instead of being made. fake_capture.c defines the runtime's capture calls and user objects, so
 * it is compiled into each program that defines CUDA functions (-export-dynamic), never into
 * libcrmmtest; the programs' own fakes report their calls with fake_capture_call. Forbidden while
 * some stream is captured, as CUDA has it:
 *  - FAKE_CALL_WAIT: waiting for the device or querying work (cudaDeviceSynchronize,
 *    cudaStreamSynchronize, cudaEventSynchronize, cudaEventQuery), in every mode;
 *  - FAKE_CALL_UNSAFE: what the global mode forbids in every thread (cudaMalloc, cudaFree, mapping
 *    memory, ...), unless the calling thread's mode is relaxed;
 *  - FAKE_CALL_STREAM: an event recorded on, or waited for by, a captured stream (it would join the
 *    allocator's events to the user's graph), or asking a captured stream's id.
 * fake_graph_destroy releases a graph's user objects, running their destructors at once. */
#ifndef CRMM_TESTS_FAKE_CAPTURE_H
#define CRMM_TESTS_FAKE_CAPTURE_H

#include <cuda_runtime_api.h>

typedef struct fake_graph fake_graph;

typedef enum fake_call_kind { FAKE_CALL_WAIT, FAKE_CALL_UNSAFE, FAKE_CALL_STREAM } fake_call_kind;

/* Start capturing stream s (a fake stream or cudaStreamPerThread) in `mode` into a new graph. */
fake_graph *fake_capture_begin(cudaStream_t s, enum cudaStreamCaptureMode mode);
/* Make s2 part of the capture of s (as waiting for an event recorded on s does): same capture id,
 * same graph. End each stream's part with fake_capture_end. */
void fake_capture_join(cudaStream_t s2, cudaStream_t s);
/* Invalidate the capture of s (and of the streams joined to it), as a forbidden call does: they
 * report cudaStreamCaptureStatusInvalidated until ended; the program then ends the capture and
 * destroys the graph (cudaStreamEndCapture fails and gives no graph: CUDA drops it). */
void fake_capture_invalidate(cudaStream_t s);
/* End the capture of s; its graph lives on until fake_graph_destroy. */
void fake_capture_end(cudaStream_t s);
/* Destroy the graph: its references to user objects are released (destructors run now). */
void fake_graph_destroy(fake_graph *g);
/* How many user objects the graph holds references to. */
int fake_graph_user_objects(const fake_graph *g);
/* User objects created and not yet destroyed, in the whole program. */
int fake_user_objects_live(void);

/* Report a call of `kind` on stream s (NULL when it names none); counts it when capture forbids
 * it now. Returns cudaErrorStreamCaptureUnsupported then (the fake should return it), else
 * cudaSuccess. */
cudaError_t fake_capture_call(const char *call, fake_call_kind kind, cudaStream_t s);
/* Capture queries (cudaStreamIsCapturing, cudaStreamGetCaptureInfo) made so far. */
int fake_capture_queries(void);
/* Forbidden calls since the last fake_capture_reset, and the name of the last one ("" if none). */
int fake_capture_forbidden(void);
const char *fake_capture_last_forbidden(void);
/* Forget every capture, graph and count (user objects still held are dropped unreleased). */
void fake_capture_reset(void);

#endif
