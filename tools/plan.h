/* plan.h — `crmm plan`: a placement plan learned from an allocation log (plan_place.c) and the
 * command that writes it (cmd_plan.c). A pool given the plan (its `plan` parameter) serves the
 * same sequence of requests at the planned offsets (plugins/pool/pool_plan.c reads the file;
 * docs/expandable-pool.md says how a plan is used).
 *
 * The file is text: the line "crmm-plan 1", then "extent BYTES", "loop INDEX" (the entry the
 * pool goes back to after the last one; "none" when the log does not end in a repeating run),
 * "count N", then N lines "SIZE OFFSET": the log's allocations in order, each rounded up to 256
 * bytes, and where in a range of `extent` bytes it goes. Two allocations whose lifetimes overlap
 * in the log never overlap in the range. */
#ifndef CRMM_TOOLS_PLAN_H
#define CRMM_TOOLS_PLAN_H
#include <stdint.h>
#include <stdio.h>
#include <crmm/error.h>
#include "replay.h"

#define PLAN_NO_LOOP UINT64_MAX

typedef struct plan {
    uint64_t count;          /* planned allocations: the log's, in its order */
    uint64_t *size;          /* per allocation: bytes, rounded up to 256 */
    uint64_t *offset;        /* per allocation: where it goes in the range */
    uint64_t extent;         /* bytes of the range: the highest end of any allocation */
    uint64_t peak_live;      /* the most bytes (rounded as above) live at once in the log: no plan
                              * spans less */
    uint64_t loop;           /* the allocation the pool goes back to after the last; PLAN_NO_LOOP */
    uint64_t loop_busy;      /* allocations of the loop's run that would find their place busy
                              * when it is served again (plan_make keeps few) */
    uint64_t extent_no_loop; /* when the placement was made periodic to have a loop: the extent of
                              * the best placement without one; else 0 */
    const char *rule;        /* the placement kept, in words (static) */
} plan;

/* Place every allocation of `log` (failed allocations and frees of unknown pointers left out) by
 * two rules, keeping the one that spans least: greedy by size (the largest first, each at the
 * lowest offset where it overlaps no allocation already placed whose lifetime overlaps its own),
 * and online best fit in the log's order. Then find the loop: the longest run at
 * the end of the log whose allocation sizes repeat the run just before it and whose placement
 * stays valid when the pool serves the run again after the log's end (checked by serving it
 * once more). When the log's end repeats but no such run holds, greedy by size places it again
 * with each allocation of the last run also holding its place while its copy in the next run
 * lives (a periodic placement): the plan then has a loop, and spans what that takes. Where the
 * log pairs same-sized blocks otherwise from run to run, a loop whose run would find a few
 * places busy (at most 1 in 10) is kept: those requests are then served elsewhere. Allocations
 * the log never frees live to its end. Errors: CRMM_ERROR_OUT_OF_MEMORY;
 * CRMM_ERROR_INVALID_ARGUMENT when the log has no allocation, or a plan of it would be one the pool
 * refuses (every allocation of 0 bytes; more allocations than CRMM_POOL_PLAN_MAX_ENTRIES; one, or
 * the placement, larger than CRMM_POOL_PLAN_MAX_EXTENT, both in crmm/pool.h). */
crmm_status plan_make(const replay_log *log, plan *out);

/* Write `pl` in the format above. CRMM_ERROR_IO naming `path` when a write fails. */
crmm_status plan_write(FILE *f, const plan *pl, const char *path);

void plan_free(plan *pl);

/* `crmm plan ARGS` (argv[0] is "plan") writing to out and err: 0, 1 (the log cannot be read or
 * planned, the plan cannot be written) or 2 (bad arguments). */
int crmm_plan_main(int argc, char **argv, FILE *out, FILE *err);

#endif
