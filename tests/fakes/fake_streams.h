/* fake_streams.h — stream handles for the programs that script CUDA (check_pool_streams,
 * check_arena_streams): each fake stream counts the CUDA calls passed its handle and fails the
 * test when a call is passed the handle of a stream already destroyed (real CUDA may crash there,
 * as cudaStreamGetId did on an H200). The programs define the CUDA functions themselves. */
#ifndef CRMM_TESTS_FAKE_STREAMS_H
#define CRMM_TESTS_FAKE_STREAMS_H

#include <cuda_runtime_api.h>

#define FAKE_STREAMS 16

/* A live fake stream in slot i (0..FAKE_STREAMS-1), with a fresh unique id and no uses. */
cudaStream_t fake_stream_new(int i);
/* Mark the stream destroyed: any later use fails the test. */
void fake_stream_destroy(cudaStream_t s);
/* True for the handle of a fake stream (live or not). */
int fake_stream_is_fake(cudaStream_t s);
/* True for a live fake stream. */
int fake_stream_is_live(cudaStream_t s);
/* The stream's unique id (as cudaStreamGetId would give). */
unsigned long long fake_stream_id(cudaStream_t s);
/* Count one use of s by `call`; fail the test when s is a destroyed fake stream. Other handles
 * (NULL, cudaStreamLegacy, cudaStreamPerThread) are not counted. */
void fake_stream_use(cudaStream_t s, const char *call);
/* How many calls were passed s's handle since the last fake_streams_reset_uses. */
int fake_stream_uses(cudaStream_t s);
void fake_streams_reset_uses(void);

#endif
