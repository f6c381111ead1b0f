/* fake_stream_cuda.h — the scripted CUDA runtime of the stream-order suites (check_pool_streams,
 * check_arena_streams, check_fixed_size_streams), and the fake device they allocate from.
 *
 * fake_stream_cuda.c defines the runtime calls an allocator makes to order memory between streams
 * (stream ids, events, waits, device and stream synchronization, the current device and the last
 * error) and the driver's cuCtxGetDevice (through cudaGetDriverEntryPointByVersion, which passes
 * every other symbol to the real runtime), so it is compiled into each program that uses it and
 * exported (-export-dynamic), never into libcrmmtest. Every call is counted in `fake_cuda`; a
 * call passed the handle of a destroyed fake stream fails the test (fake_streams.h). The fake
 * device is host memory that says it is device memory, so that an allocator over it treats
 * streams as real. */
#ifndef CRMM_TESTS_FAKE_STREAM_CUDA_H
#define CRMM_TESTS_FAKE_STREAM_CUDA_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <crmm/crmm.h>

/* An event: whether it exists, and the stream its last record was made on. */
typedef struct fake_event { int live; cudaStream_t recorded_on; } fake_event;

/* The events cudaEventCreateWithFlags hands out (slots are reused once destroyed). */
#define FAKE_EVENTS 1024
extern fake_event fake_events[FAKE_EVENTS];

/* What the scripted CUDA was asked, and how it answers. Counters are bumped atomically (threaded
 * tests call the fakes from several threads). */
typedef struct fake_cuda_state {
    int get_id, record, wait, device_sync, stream_sync, event_sync, event_create, event_destroy, query,
        get_last_error;
    int get_device, set_device, get_device_count; /* the device calls (not in fake_cuda_total) */
    int ctx_get_device; /* the driver's cuCtxGetDevice (cudaGetDriverEntryPointByVersion hands it out) */
    int forbidden; /* calls made while forbid_events_and_ids was set (each fails the test) */
    cudaStream_t last_recorded, last_waiting, last_synchronized;
    int last_recorded_device, last_waiting_device, last_synchronized_device; /* the current device then */
    fake_event *last_waited;
    cudaError_t last_error; /* what cudaGetLastError returns (and clears) */
    /* kept by fake_cuda_reset: */
    cudaError_t device_sync_result; /* what cudaDeviceSynchronize answers */
    cudaError_t record_result;      /* what cudaEventRecord answers */
    cudaError_t event_create_result; /* what cudaEventCreateWithFlags answers */
    int forbid_events_and_ids;      /* events, stream ids and queries fail the test (an allocator
                                       that must never name a stream that may be gone) */
    int no_context;                 /* cuCtxGetDevice answers CUDA_ERROR_INVALID_CONTEXT */
    int context_device_off_by;      /* cuCtxGetDevice answers the current device + this (mod count) */
    int no_ctx_get_device;          /* the driver has no cuCtxGetDevice (the lookup finds nothing) */
    /* cleared by fake_cuda_reset: */
    cudaError_t get_device_result;  /* what cudaGetDevice answers (cudaSuccess: the current device) */
    void (*during_device_sync)(void); /* run once inside the next cudaDeviceSynchronize */
} fake_cuda_state;

extern fake_cuda_state fake_cuda;

/* FAKE_DEVICE_COUNT devices; cudaSetDevice makes one current for the calling thread, as CUDA does
 * (device 0 to begin with); fake_current_device() tells which. */
#define FAKE_DEVICE_COUNT 2
int fake_current_device(void);

/* Forget the counts and the last calls (and the stream uses of fake_streams.h). */
void fake_cuda_reset(void);

/* All counted calls but cudaGetLastError. */
int fake_cuda_total(void);

/* A new fake device that gives at most max_chunks allocations at once (0: any); the caller holds
 * the one reference. fake_device_chunks: its allocations not yet freed. */
crmm_resource *fake_device_new(int max_chunks);
int fake_device_chunks(const crmm_resource *device);

#endif
