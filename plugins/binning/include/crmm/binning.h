/* crmm/binning.h — control operations of the `binning` plugin, for
 * crmm_resource_control_kind(mr, "binning", op, arg).
 *
 * Bins are kept sorted by block size; a request goes to the smallest bin whose size is at least
 * the request, and upstream when no bin is that large. */
#ifndef CRMM_BINNING_H
#define CRMM_BINNING_H

#include <stdint.h>
#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Add a bin (RMM's binning_memory_resource::add_bin). arg: crmm_binning_bin *. The size is
 * rounded up to 256. With `mr` NULL the bin is a new fixed_size resource of that block size
 * over the binning's upstream; else `mr` serves the requests up to `size` (above the next
 * smaller bin) and is retained until the binning resource is destroyed. As in RMM, a size that
 * already has a bin keeps its bin: nothing is added and `added` is set to 0 (1 when added).
 * Not safe while other threads allocate, free or query through the binning resource.
 * Every block is freed to the resource that made it: a block passed upstream before a bin of its
 * size was added still goes back upstream. A new bin smaller than an existing one takes over the
 * requests between the next smaller bin and its size from that existing bin, so it is refused
 * while that bin has blocks live (the binning does not know which of them were asked for with
 * those sizes); add smaller bins first, or once those blocks are freed.
 * CRMM_ERROR_INVALID_ARGUMENT for a NULL arg, a size of 0 or above 2^63, or an `mr` whose memory
 * is not accessible where the binning's is (a host-only bin under a device binning) or is on
 * another device; CRMM_ERROR_STATE when the next larger bin has blocks live, or cannot answer
 * CRMM_QUERY_ALLOCATIONS (nothing is added then); CRMM_ERROR_OUT_OF_MEMORY when malloc fails; a
 * fixed_size creation error. */
#define CRMM_BINNING_OP_ADD_BIN 1

typedef struct crmm_binning_bin {
    uint64_t size;      /* in: the bin's largest request (block size of a new fixed_size bin) */
    crmm_resource *mr;  /* in: the bin's resource, or NULL for a fixed_size bin */
    int added;          /* out: 1 when the bin was added, 0 when that size already had one */
} crmm_binning_bin;

/* Count the bins. arg: uint64_t *; CRMM_ERROR_INVALID_ARGUMENT when NULL. */
#define CRMM_BINNING_OP_BIN_COUNT 2

/* Read bin `index` (0 = the smallest) into a crmm_binning_bin: its size and its resource (a
 * borrowed pointer, valid while the binning resource lives; `added` is left alone).
 * arg: crmm_binning_bin *, with `size` set to the index on the way in;
 * CRMM_ERROR_INVALID_ARGUMENT when NULL or the index is out of range. */
#define CRMM_BINNING_OP_GET_BIN 3

#ifdef __cplusplus
}
#endif

#endif
