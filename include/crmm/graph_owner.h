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
 * An owner is a nonzero number of the framework's choosing (PyTorch's hooks: one per capture).
 * crmm_graph_owner_begin opens a capture of the owner, before the capture starts, naming the
 * device and the stream it will be captured on; while the capture is under way, one that an
 * allocator of crmm meets for the first time on a stream the owner's `claims` function accepts is
 * the owner's (and so are the other streams of that capture). crmm_graph_owner_end closes it, or
 * crmm closes it itself once the stream is seen no longer holding the capture it adopted (a
 * capture invalidated, or ended without crmm_graph_owner_end). Each begin takes a reference on the
 * owner and each crmm_graph_owner_release drops one; when the last goes, crmm synchronizes the
 * owner's device (the graphs' launches may still be running), then hands every allocator the
 * memory of the owner's graphs, as the user object's destructor would have.
 *
 * That synchronization waits for all of the device's work, and would invalidate a capture under
 * way on the device: it is put off while the capture of any owner is under way (until its end, or
 * the next release), and a begin waits for one in progress; a capture that no owner knows about
 * (another thread's, not PyTorch's) is not protected, as with the pool's other device
 * synchronizations (docs/cuda-graphs.md, "Known limits"). The memory comes back at the last
 * release even where a copy of a graph lives on that the owner does not know of (a graph cloned,
 * instantiated again, or nested as a child graph): an owner answers for all of them. Thread-safe. */
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
 * began). Called while crmm holds the owners' lock and the owner's stream is being captured: it
 * must not call crmm, and must not throw (a C++ caller catches its exceptions). */
typedef bool (*crmm_graph_owner_claims_fn)(void *ctx, crmm_cuda_stream_t stream);

/* Open a capture of `owner` (nonzero) on `device`, which will be captured on `stream` (NULL if
 * not known: the owner's capture then counts as under way until it is ended): until
 * crmm_graph_owner_end(owner), captures that claims(ctx, stream) accepts are the owner's; takes
 * one reference on the owner. Waits while released graphs' memory is being handed back (that
 * synchronizes the device). Errors: CRMM_ERROR_INVALID_ARGUMENT (owner 0, claims NULL, a negative
 * device, a capture of `owner` open already, or `owner` known on another device),
 * CRMM_ERROR_OUT_OF_MEMORY (the table of owners cannot grow). */
CRMM_API crmm_status crmm_graph_owner_begin(uint64_t owner, int device, crmm_cuda_stream_t stream,
                                            crmm_graph_owner_claims_fn claims, void *ctx);

/* Close the open capture of `owner`: claims is not called for it again once this returns (so its
 * ctx may be freed). The graphs it captured stay the owner's. Hands back what released owners'
 * graphs held if it waited for this capture's end (synchronizing their devices; a failure there is
 * logged, and not this call's). Errors: CRMM_ERROR_INVALID_ARGUMENT (no capture of `owner` is
 * open: never begun, ended, or closed by crmm once its capture was seen over). */
CRMM_API crmm_status crmm_graph_owner_end(uint64_t owner);

/* Drop one reference on `owner` (PyTorch: one graph of the pool was reset). When none is left and
 * the owner's captures took memory from crmm, crmm synchronizes its device and hands that memory
 * back to its allocators, unless an owner's capture is under way (then at its end, or at the next
 * release); the owner is forgotten. Errors: CRMM_ERROR_INVALID_ARGUMENT (unknown owner, or its
 * capture still open); CRMM_ERROR_CUDA when a device cannot be synchronized (the memory of the
 * graphs on it stays held and the next release or end tries again). */
CRMM_API crmm_status crmm_graph_owner_release(uint64_t owner);

/* For allocators (plugins/common/graph_hold.c), at their first call in capture `capture_id` on
 * `stream`: when an owner's capture under way is that capture (claims accepted it, or accepted
 * another stream of it before), released(arg) is recorded with that owner, to be called once
 * (with no lock of crmm held) when the owner's graphs are gone, and true is returned; the
 * allocator then ties no user object. False when no owner claims it, or the owner's list cannot
 * grow. */
CRMM_API bool crmm_graph_owner_adopt(crmm_cuda_stream_t stream, unsigned long long capture_id,
                                     void (*released)(void *arg), void *arg);

/* How many captures owners have adopted since the process started (every allocator's first call
 * in a capture counts once): for tests and diagnostics. Never fails. */
CRMM_API uint64_t crmm_graph_owner_adopted_total(void);

#ifdef __cplusplus
}
#endif

#endif
