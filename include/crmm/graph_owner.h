/* crmm/graph_owner.h — CUDA graphs whose lifetime a framework tells crmm (docs/cuda-graphs.md).
 *
 * crmm learns that a captured graph can no longer run, and so that the memory its capture took
 * is free again, from a CUDA user object tied to the graph, whose destructor the driver runs once
 * the graph and its executable graphs are destroyed and their launches have finished. A graph
 * holding a user object costs each of its launches a little device time. A framework that owns
 * its graphs' lifetime (PyTorch's CUDAGraph tells its allocator when a capture begins and ends
 * and when a graph is reset) can tell crmm the same, and crmm then ties no user object to the
 * graphs that framework captures.
 *
 * An owner is a nonzero number of the framework's choosing (PyTorch: one per graph memory pool).
 * crmm_graph_owner_begin opens a capture of the owner; while it is open, a capture that an
 * allocator of crmm meets for the first time on a stream the owner's `claims` function accepts is
 * the owner's. crmm_graph_owner_end closes it. Each begin takes a reference on the owner and each
 * crmm_graph_owner_release drops one; when the last goes, crmm waits for the device (the
 * graphs' launches may still be running), then hands every allocator the memory of the owner's
 * graphs, as the user object's destructor would have. Thread-safe. */
#ifndef CRMM_GRAPH_OWNER_H
#define CRMM_GRAPH_OWNER_H

#include <stdbool.h>
#include <stdint.h>
#include <crmm/export.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the capture under way on `stream` is the owner's (PyTorch: the capture its graph
 * began). Called while crmm holds the owners' lock: it must not call crmm. */
typedef bool (*crmm_graph_owner_claims_fn)(void *ctx, crmm_cuda_stream_t stream);

/* Open a capture of `owner` (nonzero): until crmm_graph_owner_end(owner), captures that claims(ctx,
 * stream) accepts are the owner's; takes one reference on the owner. Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (owner 0, claims NULL, a capture of `owner` open already),
 * CRMM_ERROR_OUT_OF_MEMORY (the table of owners cannot grow). */
CRMM_API crmm_status crmm_graph_owner_begin(uint64_t owner, crmm_graph_owner_claims_fn claims, void *ctx);

/* Close the open capture of `owner`: claims is not called for it again once this returns (so its
 * ctx may be freed). The graphs it captured stay the owner's. Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (no capture of `owner` is open). */
CRMM_API crmm_status crmm_graph_owner_end(uint64_t owner);

/* Drop one reference on `owner` (PyTorch: one graph of the pool was reset). When none is left and
 * the owner's captures took memory from crmm, crmm synchronizes `device` (in the relaxed capture
 * mode) and hands that memory back to its allocators; the owner is forgotten. Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (unknown owner, or its capture still open); CRMM_ERROR_CUDA when the
 * device cannot be synchronized (another thread is capturing in the global mode): the memory
 * stays held and the next release of any owner tries again. */
CRMM_API crmm_status crmm_graph_owner_release(int device, uint64_t owner);

/* For allocators (plugins/common/graph_hold.c), at the first call of a capture on `stream`: when
 * an open capture of some owner claims the stream, released(arg) is recorded with that owner, to
 * be called once (on the thread of the owner's last release, with no lock of crmm held) when the
 * owner's graphs are gone, and true is returned; the allocator then ties no user object. False
 * when no owner claims it, or the owner's list cannot grow. */
CRMM_API bool crmm_graph_owner_adopt(crmm_cuda_stream_t stream, void (*released)(void *arg), void *arg);

/* How many captures owners have adopted since the process started (every allocator's first call
 * in a capture counts once): for tests and diagnostics. Never fails. */
CRMM_API uint64_t crmm_graph_owner_adopted_total(void);

#ifdef __cplusplus
}
#endif

#endif
