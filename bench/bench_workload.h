/* bench_workload.h — the deterministic allocate/free sequences that `crmm bench` times.
 *
 * A workload describes one benchmark set; bench_sequence_make() turns it into the exact list of
 * operations one thread performs, computed before any timing so that the timed loop does nothing
 * but call the resource. Two modes:
 *  - BENCH_MODE_STEPS (docs/benchmark.md, sets A–D): `steps` steps of a xorshift64 generator seeded with
 *    42 + thread. A step allocates (size uniform in [1, max_size]) when nothing is live, or when
 *    fewer than `max_live` blocks are live and a fair coin says so; otherwise it frees a live block
 *    chosen uniformly. Every block still live afterwards is freed at the end.
 *  - BENCH_MODE_RANDOM (RMM's random_allocations benchmark): 2 × `allocations` steps; a step
 *    allocates when nothing is live, else with probability 73% as long as fewer than
 *    `allocations` blocks were allocated in total and the live bytes stay below `max_usage`;
 *    otherwise it frees a live block chosen uniformly. As in RMM, a size is drawn at every step.
 *    Blocks still live afterwards are freed at the end. */
#ifndef CRMM_BENCH_WORKLOAD_H
#define CRMM_BENCH_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <crmm/error.h>

typedef enum bench_mode {
    BENCH_MODE_STEPS = 0,  /* the default workload of docs/benchmark.md */
    BENCH_MODE_RANDOM = 1  /* RMM's random_allocations */
} bench_mode;

/* Seed of thread t's generator: BENCH_SEED + t. */
#define BENCH_SEED 42u
/* RMM random_allocations: percent of steps that allocate, and the cap on live bytes (16000 MiB). */
#define BENCH_RANDOM_ALLOC_PERCENT 73u
#define BENCH_RANDOM_MAX_USAGE (16000ull << 20)
/* Limits the command line enforces (a sequence of 16-byte ops must fit in memory). */
#define BENCH_MAX_STEPS 100000000ull
#define BENCH_MAX_LIVE (1u << 24)

typedef struct bench_workload {
    bench_mode mode;
    uint64_t steps;       /* STEPS: number of steps (> 0) */
    uint32_t max_live;    /* STEPS: most blocks live at once (> 0) */
    uint64_t allocations; /* RANDOM: number of allocations (> 0); 2 × allocations steps */
    uint64_t max_usage;   /* RANDOM: live bytes stay below this (BENCH_RANDOM_MAX_USAGE) */
    uint64_t max_size;    /* sizes are uniform in [1, max_size] (> 0) */
} bench_workload;

/* One operation: allocate `bytes` into `slot`, or free the block in `slot` (of `bytes`). */
typedef struct bench_op {
    uint64_t bytes;
    uint32_t slot;
    uint32_t is_free;
} bench_op;

/* The operations of one thread. ops[0 .. steps) are the steps (one operation each), the rest
 * are the final frees. */
typedef struct bench_sequence {
    bench_op *ops;
    size_t count;             /* all operations: steps plus final frees */
    size_t steps;             /* operations that are steps */
    size_t allocs, frees;     /* allocs == frees */
    uint32_t slots;           /* slot numbers are < slots (the most blocks live at once) */
    uint64_t peak_live_bytes; /* max over the sequence of the sum of live requested bytes */
    uint32_t peak_live_count; /* max number of blocks live at once */
} bench_sequence;

/* The named sets A-D of docs/benchmark.md (BENCH_MODE_STEPS), in that order. */
typedef struct bench_named_set {
    const char *name;
    uint64_t steps;
    uint32_t max_live;
    uint64_t max_size;
    unsigned threads;
} bench_named_set;
#define BENCH_NAMED_SETS 4
extern const bench_named_set bench_named_sets[BENCH_NAMED_SETS];

/* One step of xorshift64 (Marsaglia, shifts 13, 7, 17); *state must not be 0. */
uint64_t bench_xorshift64(uint64_t *state);

/* Check a workload's parameters. CRMM_ERROR_INVALID_ARGUMENT with a message naming the bad one. */
crmm_status bench_workload_check(const bench_workload *w);

/* Build thread `thread`'s sequence of workload `w` into *out (free with bench_sequence_free).
 * Errors: CRMM_ERROR_INVALID_ARGUMENT (bad workload, NULL), CRMM_ERROR_OUT_OF_MEMORY. */
crmm_status bench_sequence_make(const bench_workload *w, unsigned thread, bench_sequence *out);

/* Free a sequence's operations and zero it. NULL or a zeroed sequence: no-op. */
void bench_sequence_free(bench_sequence *s);

#endif
