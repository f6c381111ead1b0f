/* thread_serial.h — a number for the calling thread: 1, 2, ... in the order threads first ask,
 * never reused. It tells apart what one handle names on each thread: cudaStreamPerThread is a
 * different stream on every thread, so a stream's identity is its handle and, for that handle,
 * the thread's serial. */
#ifndef CRMM_PLUGINS_THREAD_SERIAL_H
#define CRMM_PLUGINS_THREAD_SERIAL_H

#include <stdint.h>
#include <crmm/resource.h>

/* The serial of the calling thread (given at its first call). */
uint64_t thread_serial(void);

/* The thread part of `stream`'s identity on the calling thread: its serial for the per-thread
 * default stream, else 0. */
static inline uint64_t thread_serial_of_stream(crmm_cuda_stream_t stream)
{
    return stream == CRMM_CUDA_STREAM_PER_THREAD ? thread_serial() : 0;
}

#endif
