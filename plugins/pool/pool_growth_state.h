/* pool_growth_state.h — what the pool holds from upstream and how it may grow: its chunks, the
 * bytes reserved, its limits and, for an expandable pool, the reserved address range and its
 * pages (pool_growth.c, pool_expand.c). The pool's lock guards all of it (pool_resource.h). */
#ifndef CRMM_PLUGINS_POOL_GROWTH_STATE_H
#define CRMM_PLUGINS_POOL_GROWTH_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include "pool_block.h"
#include "pool_streams.h"
#include "pool_vmm.h"

/* The page_moves parameter: what an expandable pool does when growth would pass its mark while
 * free pages could be moved instead (pool_expand.c). */
enum {
    POOL_MOVES_WAIT,               /* wait for the device, then move them */
    POOL_MOVES_IDLE,               /* move them when the streams holding them are idle, else map new pages */
    POOL_MOVES_NEVER,              /* map new pages; free pages go back only at trim and before out of memory */
    POOL_MOVES_BUDGET              /* as wait; on one stream, own pages also move beyond once per mark, paid
                                    * from a budget earned by allocating, and moves never lock in the slack */
};

/* Pages lent by one move that did not wait (pool_expand.c): their memory is mapped again where the
 * pool grew, while their old addresses stay mapped until the work queued before the move, which
 * `event` (recorded on the stream that freed them) follows, has finished. */
#define POOL_LENT_BATCHES 4
typedef struct pool_lent_batch {
    pool_stream pages;             /* owner of the lent blocks (no stream's lookup finds it) */
    void *event;                   /* cudaEvent_t, made at the batch's first use */
    crmm_cuda_stream_t stream;     /* where the event was recorded last */
} pool_lent_batch;

typedef struct pool_growth_state {
    pool_chunk *chunks;            /* upstream allocations, newest first */
    uint64_t chunk_count;
    uint64_t reserved, reserved_peak; /* bytes held from upstream */
    uint64_t growths;              /* growths: upstream chunks taken, or runs of pages mapped */
    uint64_t maximum;              /* most it may reserve; POOL_NO_MAXIMUM */
    uint64_t initial;              /* initial_size: an expandable pool never gives back below it */
    bool expandable;               /* growth maps pages of one reserved range (pool_expand.c) */
    bool moved_since_mark;         /* expandable: a growth moved free pages and the mark has not risen since */
    uint64_t mark;                 /* expandable: the most it had to map (see pool_expand.c) */
    uint64_t move_budget;          /* expandable, page_moves = budget: bytes of pages that moves beyond once
                                    * per mark may still take (pool_expand.c) */
    uint64_t budget_counted;       /* the bytes allocated (counts.total_bytes) already earned into it */
    size_t last_move_size;         /* budget: the request whose growth the last move of a stream's own pages
                                    * covered wholly, while no growth has mapped new pages since; 0: none */
    uint8_t page_moves;            /* expandable: POOL_MOVES_* */
    pool_vmm vmm;                  /* that range */
    pool_stream unmapped;          /* owner of the range's blocks that have no memory mapped */
    pool_lent_batch *lent;         /* POOL_LENT_BATCHES moves whose old addresses may still be mapped,
                                    * made at the first move that does not wait (kept out of the
                                    * pool's record, whose hot fields it would push apart) */
    uint64_t release_threshold;    /* free bytes in whole pages kept when memory is given back */
    uint64_t device_memory;        /* the device's total memory: an expandable pool never maps more */
} pool_growth_state;

#endif
