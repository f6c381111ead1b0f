/* torch_record_stream.c — PyTorch's tensor.record_stream(s) for crmm's PyTorch allocator
 * (crmm_torch_record_stream, crmm/torch.h).
 *
 * PyTorch frees a tensor's memory on the stream it was allocated on; record_stream says another
 * stream uses it too, and the memory must not be handed out again while that stream's work may
 * still read or write it. crmm keeps one row per (pointer, recorded stream). When the pointer is
 * freed, the free's stream is made to wait (an event recorded on each recorded stream, waited for
 * with cudaStreamWaitEvent) before the block goes back to the resource: a resource reuses memory
 * in the order of the stream it was freed on (and across streams only after that stream's work),
 * so nothing allocated from it later runs before the recorded streams' work queued by the free.
 * PyTorch's own allocator instead holds the block back until such events complete; the wait costs
 * the free's stream that ordering, and nothing on the host.
 *
 * Records are rare (multi-stream code records a few tensors a step), so they sit in one array
 * under a mutex, searched linearly; a free looks there only while any record exists (one atomic
 * load otherwise). */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <crmm/error.h>
#include <crmm/fork_guard.h>
#include <crmm/log.h>
#include <crmm/torch.h>
#include "internal.h"

typedef struct record {
    void *ptr;
    crmm_cuda_stream_t stream;
} record;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static record *rows;  /* guarded by lock */
static size_t capacity;
static size_t count;  /* written under lock, read without it by the free's fast path */

static void lock_rows(void *arg) { (void)arg; pthread_mutex_lock(&lock); }
static void unlock_rows(void *arg) { (void)arg; pthread_mutex_unlock(&lock); }
static crmm_fork_guard fork_guard = {.prepare = lock_rows, .parent = unlock_rows, .child = unlock_rows};
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static void add_fork_guard(void) { crmm_fork_guard_add(&fork_guard); }

crmm_status crmm_torch_record_stream(void *ptr, crmm_cuda_stream_t stream)
{
    if (!ptr)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "crmm_torch_record_stream: ptr is NULL");
    pthread_once(&guard_once, add_fork_guard);
    crmm_status st = CRMM_OK;
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < count && !(rows[i].ptr == ptr && rows[i].stream == stream))
        i++;
    if (i == count) { /* not recorded yet */
        if (count == capacity) {
            size_t more = capacity ? 2 * capacity : 16;
            record *grown = realloc(rows, more * sizeof *grown);
            if (!grown)
                st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY,
                                    "crmm_torch_record_stream: no host memory for the record");
            else
                rows = grown, capacity = more;
        }
        if (st == CRMM_OK) {
            rows[count] = (record){ptr, stream};
            __atomic_store_n(&count, count + 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&lock);
    return st;
}

/* Make `stream` wait for the work queued on `recorded` so far; if CUDA refuses (a stream of
 * another device, a capture), wait on the host instead, and say so when even that fails. */
static void wait_for(crmm_cuda_stream_t stream, crmm_cuda_stream_t recorded, void *ptr)
{
    cudaEvent_t ev = NULL;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess && (e = cudaEventRecord(ev, (cudaStream_t)recorded)) == cudaSuccess &&
        (e = cudaStreamWaitEvent((cudaStream_t)stream, ev, 0)) != cudaSuccess) {
        cudaGetLastError();
        e = cudaEventSynchronize(ev); /* recorded, but the free's stream cannot wait for it */
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        crmm_log(CRMM_LOG_ERROR,
                 "crmm_torch_deallocate: %p: cannot wait for stream %p, which record_stream named (%s); "
                 "its work may still use the memory when it is handed out again",
                 ptr, (void *)recorded, cudaGetErrorString(e));
    }
    if (ev)
        cudaEventDestroy(ev); /* released once the event completes */
}

void crmm_torch_wait_recorded(void *ptr, crmm_cuda_stream_t stream)
{
    if (!__atomic_load_n(&count, __ATOMIC_ACQUIRE))
        return;
    for (;;) { /* take this pointer's rows out, a handful at a pass, and wait outside the lock */
        record found[8];
        size_t n = 0;
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < count && n < sizeof found / sizeof found[0];) {
            if (rows[i].ptr == ptr) {
                found[n++] = rows[i];
                rows[i] = rows[count - 1];
                __atomic_store_n(&count, count - 1, __ATOMIC_RELEASE);
            } else {
                i++;
            }
        }
        pthread_mutex_unlock(&lock);
        for (size_t k = 0; k < n; k++)
            if (found[k].stream != stream)
                wait_for(stream, found[k].stream, ptr);
        if (n < sizeof found / sizeof found[0])
            return; /* a pass that filled `found` may have left more */
    }
}
