/* probe_resource.h — a resource the tests make by hand to watch what a caller asks of it: the
 * blocks out, the allocations made, and the bytes, stream and current device of the last allocate
 * and deallocate, and its trims; asked, it says what it holds (its live bytes and a cache the test
 * sets, which a trim empties). Its memory is aligned host memory unless the test gives other
 * memory (the GPU suites: stream-ordered cudaMallocAsync); it may refuse past a number of live
 * blocks, and refuse frees (an upstream whose free fails, for the layers above it) and trims. */
#ifndef CRMM_TESTS_PROBE_RESOURCE_H
#define CRMM_TESTS_PROBE_RESOURCE_H

#include <crmm/crmm.h>

/* Where a probe's blocks come from (get and put NULL: aligned host memory), and how it learns the
 * current device. */
typedef struct probe_memory {
    crmm_status (*get)(void **ptr, size_t bytes, crmm_cuda_stream_t stream);
    crmm_status (*put)(void *ptr, crmm_cuda_stream_t stream);
    int (*current_device)(void); /* NULL: the devices are not recorded (stay -1) */
} probe_memory;

typedef struct probe_resource {
    crmm_resource base;
    int live;                  /* blocks handed out and not freed (atomic) */
    int allocations;           /* allocate calls that handed out a block (atomic) */
    int max_live;              /* more live blocks are refused as out of memory; 0: no limit */
    int refuses_frees;         /* frees are refused (CRMM_ERROR_CUDA), the block staying live */
    int serves_at_once;        /* its try_allocate/try_deallocate serve (else refuse) */
    int served_at_once;        /* calls those served (atomic) */
    int trims;                 /* trim calls (atomic) */
    int trim_device;           /* the current device during the last trim */
    int refuses_trims;         /* trims fail with CRMM_ERROR_CUDA */
    int answers_reserved;      /* answers CRMM_QUERY_BYTES_RESERVED: its live bytes plus cached_bytes */
    uint64_t live_bytes;       /* bytes of the blocks handed out and not freed (atomic) */
    uint64_t cached_bytes;     /* free bytes it pretends to hold; a trim that succeeds gives them back */
    /* the last calls' (stored atomically: threaded tests share a probe) */
    size_t free_bytes;         /* bytes given to the last deallocate */
    crmm_cuda_stream_t alloc_stream, free_stream; /* streams of the last allocate and deallocate */
    int alloc_device, free_device;                /* the current device during them */
    const probe_memory *memory;
    /* a test's hook, called after each allocate that handed out a block ('a') and after each
     * answer of what it holds was read, before it is returned ('q'); NULL: none */
    void (*hook)(struct probe_resource *p, char what);
} probe_resource;

/* In a test: a probe of `flags` bound to `device`, over `memory` (NULL: host memory); the caller
 * holds the one reference. */
probe_resource *probe_resource_new(const probe_memory *memory, unsigned flags, int device);

#endif
