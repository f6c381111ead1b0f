// _torch_graph_hooks.cpp — PyTorch's graph-pool hooks for crmm (docs/cuda-graphs.md).
//
// PyTorch's CUDAGraph tells its allocator when a capture begins (beginAllocateToPool, with a
// filter that recognizes the capture's streams), when it ends (endAllocateToPool) and when a graph
// is reset (releasePool); its pluggable allocator passes these on to functions that only C++ can
// set. This library sets them on the pluggable allocator crmm.allocators.torch.use_crmm()
// installed, and passes them on to crmm's graph owners (crmm/graph_owner.h), so that crmm ties no
// CUDA user object to the graphs PyTorch captures.
//
// Each capture is an owner of its own (a number this library gives), claimed by PyTorch's filter.
// A graph pool (PyTorch's MempoolId_t) may serve several captures (torch.cuda.graph(pool=...)):
// PyTorch releases it once per graph reset, and once every capture of the pool has been released
// the pool's owners are released, as PyTorch's own allocator frees a private pool when its use
// count reaches zero. torch.cuda.use_mem_pool's begin, end and release are PyTorch's alone.
//
// The library also passes tensor.record_stream(s) on to crmm (crmm_torch_record_stream): PyTorch's
// pluggable allocator hands record_stream only to a function C++ sets, and without one a tensor
// freed while another stream still used it could be handed out again under that stream's work.
//
// And it allocates for PyTorch: crmm_torch_hooks_allocate, the allocation function use_crmm()
// gives PyTorch's pluggable allocator when this library loads, raises crmm's failures in PyTorch
// (torch.OutOfMemoryError when memory ran out, as PyTorch's own allocator does), where libcrmm's
// crmm_torch_allocate can only return NULL, which PyTorch does not check.
//
// Built only where PyTorch's headers are found; it links libcrmm's functions through the pointers
// crmm_torch_install_graph_hooks, crmm_torch_install_record_stream and crmm_torch_install_allocator are given
// (crmm/allocators/torch.py passes those of the libcrmm it loaded), so it works with whichever
// libcrmm the Python package uses.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>
#include <pthread.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>
#include <stdexcept>
#include <string>
#include <crmm/graph_owner.h>
#include <crmm/torch.h>

namespace {

using Filter = std::function<bool(cudaStream_t)>;
using BeginFn = decltype(&crmm_graph_owner_begin);
using EndFn = decltype(&crmm_graph_owner_end);
using ReleaseFn = decltype(&crmm_graph_owner_release);

BeginFn owner_begin;
EndFn owner_end;
ReleaseFn owner_release;

struct Capture {
    uint64_t owner;                 // 0: not crmm's (a use_mem_pool context, or a refused begin)
    bool graph;                     // a graph's capture, not a use_mem_pool context
    std::unique_ptr<Filter> filter; // crmm calls it until owner_end returns
};

struct Pool {
    int captures = 0;             // graph captures begun and not yet released
    int others_ended = 0;         // torch.cuda.use_mem_pool contexts ended, their release to come
    std::vector<Capture> open;    // begun, not ended: the newest ends first (contexts nest)
    std::vector<uint64_t> owners; // begun with crmm (ended or not)
};

// PyTorch keeps a pool per device for each MempoolId_t. Made once and never destroyed: a graph
// reset at exit (an atexit handler, a daemon thread) still finds them.
using PoolKey = std::pair<int, c10::cuda::MempoolId_t>;
std::mutex &lock = *new std::mutex; // guards what follows; never held while crmm is called
std::map<PoolKey, Pool> &pools = *new std::map<PoolKey, Pool>;
uint64_t last_owner;

// PyTorch's filter may throw (a CUDA error); crmm calls this from C, under its lock.
bool claims(void *ctx, crmm_cuda_stream_t stream)
{
    try {
        return (*static_cast<Filter *>(ctx))(stream);
    } catch (...) {
        return false;
    }
}

void begin(int device, c10::cuda::MempoolId_t pool, Filter filter)
{
    // torch.cuda.use_mem_pool begins a pool too, with a filter that takes every stream of its
    // thread: the legacy default stream, which no capture can hold, tells it from a graph's
    // capture. It is left to PyTorch (crmm owns nothing for it); its end and release are matched.
    bool graph = false;
    try {
        graph = !filter(cudaStreamLegacy);
    } catch (...) {
    }
    Capture c{0, graph, graph ? std::make_unique<Filter>(std::move(filter)) : nullptr};
    if (graph) {
        {
            std::lock_guard<std::mutex> g(lock);
            c.owner = ++last_owner;
        }
        // CUDAGraph::capture_begin captures the device's current stream, right after this
        cudaStream_t stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
        // refused (no memory): the capture's graphs get user objects, as without these hooks
        if (owner_begin(c.owner, device, stream, claims, c.filter.get()) != CRMM_OK)
            c.owner = 0;
    }
    try {
        std::lock_guard<std::mutex> g(lock);
        Pool &p = pools[{device, pool}];
        p.open.reserve(p.open.size() + 1);
        if (c.owner)
            p.owners.push_back(c.owner);
        if (graph)
            p.captures++;
        p.open.push_back(std::move(c)); // cannot throw: reserved
    } catch (...) {
        // no memory to record it: crmm lets go of the owner (and of its filter, freed with c)
        // before PyTorch's capture_begin fails with this exception
        if (c.owner) {
            owner_end(c.owner);
            owner_release(c.owner);
        }
        throw;
    }
}

void end(int device, c10::cuda::MempoolId_t pool)
{
    Capture c;
    {
        std::lock_guard<std::mutex> g(lock);
        auto it = pools.find({device, pool});
        if (it == pools.end() || it->second.open.empty())
            return;
        c = std::move(it->second.open.back());
        it->second.open.pop_back();
        if (!c.graph)
            it->second.others_ended++;
    }
    if (c.owner)
        owner_end(c.owner); // refused when crmm closed it itself (its capture was seen over)
    // c's filter is freed here: crmm no longer calls it
}

void release(int device, c10::cuda::MempoolId_t pool)
{
    std::vector<uint64_t> owners;
    {
        std::lock_guard<std::mutex> g(lock);
        auto it = pools.find({device, pool});
        if (it == pools.end())
            return;
        Pool &p = it->second;
        if (p.others_ended > 0) // a use_mem_pool context releases right after its end
            p.others_ended--;
        else if (p.captures > 0 && --p.captures == 0)
            owners.swap(p.owners); // every graph of the pool is gone
        if (p.captures == 0 && p.others_ended == 0 && p.open.empty())
            pools.erase(it);
    }
    // a release that cannot synchronize the device keeps the memory: crmm's next one retries
    for (uint64_t owner : owners)
        owner_release(owner);
}

void lock_for_fork()
{
    lock.lock();
}

void unlock_after_fork()
{
    lock.unlock();
}

} // namespace

// The current allocator as the pluggable one use_crmm() installed, or NULL with a message.
static torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator *current_pluggable(char *message, size_t size)
{
    auto current = torch::cuda::CUDAPluggableAllocator::getCurrentAllocator();
    auto *pluggable = dynamic_cast<torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator *>(current.get());
    if (!pluggable)
        std::snprintf(message, size, "PyTorch's current CUDA allocator is not a pluggable one (call use_crmm() first)");
    return pluggable;
}

// Install the hooks on PyTorch's current allocator, which must be the pluggable allocator of
// use_crmm(); begin_fn, end_fn and release_fn are libcrmm's crmm_graph_owner_begin, _end and
// _release. Returns 0, or -1 with a message in `message` (`size` bytes) when the current
// allocator is not a pluggable one or a function is missing.
extern "C" __attribute__((visibility("default"))) int crmm_torch_install_graph_hooks(void *begin_fn, void *end_fn,
                                                                                     void *release_fn, char *message,
                                                                                     size_t size)
{
    if (!begin_fn || !end_fn || !release_fn) {
        std::snprintf(message, size, "crmm_torch_install_graph_hooks: a crmm function is missing");
        return -1;
    }
    auto *pluggable = current_pluggable(message, size);
    if (!pluggable)
        return -1;
    // a forked child finds the lock free, whichever parent thread held it at the fork
    static bool fork_guarded = pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork) == 0;
    if (!fork_guarded) {
        std::snprintf(message, size, "crmm_torch_install_graph_hooks: pthread_atfork failed");
        return -1;
    }
    owner_begin = reinterpret_cast<BeginFn>(begin_fn);
    owner_end = reinterpret_cast<EndFn>(end_fn);
    owner_release = reinterpret_cast<ReleaseFn>(release_fn);
    pluggable->set_begin_allocate_to_pool(begin);
    pluggable->set_end_allocate_to_pool_fn(end);
    pluggable->set_release_pool(release);
    return 0;
}

// Pass tensor.record_stream(stream) on PyTorch's current (pluggable) allocator to record_fn,
// libcrmm's crmm_torch_record_stream; a failure there is thrown to PyTorch as std::runtime_error
// with last_error_fn's message (libcrmm's crmm_last_error), which Python sees as RuntimeError.
// Returns 0, or -1 with a message as crmm_torch_install_graph_hooks does.
extern "C" __attribute__((visibility("default"))) int crmm_torch_install_record_stream(void *record_fn,
                                                                                       void *last_error_fn,
                                                                                       char *message, size_t size)
{
    if (!record_fn || !last_error_fn) {
        std::snprintf(message, size, "crmm_torch_install_record_stream: a crmm function is missing");
        return -1;
    }
    auto *pluggable = current_pluggable(message, size);
    if (!pluggable)
        return -1;
    auto record = reinterpret_cast<decltype(&crmm_torch_record_stream)>(record_fn);
    auto last_error = reinterpret_cast<const char *(*)(void)>(last_error_fn);
    pluggable->set_record_stream_fn([record, last_error](void *ptr, cudaStream_t stream) {
        if (record(ptr, reinterpret_cast<crmm_cuda_stream_t>(stream)) != CRMM_OK)
            throw std::runtime_error(std::string("crmm: tensor.record_stream: ") + last_error());
    });
    return 0;
}

namespace {

decltype(&crmm_torch_allocate_checked) allocate_checked;
decltype(&crmm_torch_deallocate) deallocate;
const char *(*allocate_error)(void);

// `bytes` as PyTorch's out-of-memory message writes sizes ("20.00 MiB").
std::string format_size(ssize_t bytes)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    char buf[48];
    std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
    return buf;
}

} // namespace

// Give this library libcrmm's crmm_torch_allocate_checked, crmm_torch_deallocate and
// crmm_last_error, for crmm_torch_hooks_allocate and _deallocate; done before PyTorch's allocator
// is made over them. Returns 0, or -1 with a message when a function is missing.
extern "C" __attribute__((visibility("default"))) int crmm_torch_install_allocator(void *allocate_fn,
                                                                                   void *deallocate_fn,
                                                                                   void *last_error_fn,
                                                                                   char *message, size_t size)
{
    if (!allocate_fn || !deallocate_fn || !last_error_fn) {
        std::snprintf(message, size, "crmm_torch_install_allocator: a crmm function is missing");
        return -1;
    }
    allocate_checked = reinterpret_cast<decltype(allocate_checked)>(allocate_fn);
    deallocate = reinterpret_cast<decltype(deallocate)>(deallocate_fn);
    allocate_error = reinterpret_cast<decltype(allocate_error)>(last_error_fn);
    return 0;
}

// PyTorch's pluggable allocator's allocation function: crmm_torch_allocate_checked, its failure
// thrown as c10::OutOfMemoryError (torch.OutOfMemoryError in Python; the message starts "CUDA out
// of memory." as PyTorch's does, which code that recovers from running out looks for) or, for
// another failure, c10::Error (RuntimeError), with crmm's message.
extern "C" __attribute__((visibility("default"))) void *crmm_torch_hooks_allocate(ssize_t size, int device,
                                                                                  cudaStream_t stream)
{
    if (!allocate_checked)
        C10_THROW_ERROR(Error, "crmm: crmm_torch_hooks_allocate called before crmm_torch_install_allocator "
                               "(use crmm.allocators.torch.use_crmm())");
    void *ptr = nullptr;
    crmm_status st = allocate_checked(size, device, reinterpret_cast<crmm_cuda_stream_t>(stream), &ptr);
    if (st == CRMM_OK)
        return ptr;
    if (st == CRMM_ERROR_OUT_OF_MEMORY)
        C10_THROW_ERROR(OutOfMemoryError, "CUDA out of memory. Tried to allocate " + format_size(size) + " on device " +
                                              std::to_string(device) + " through crmm: " + allocate_error());
    C10_THROW_ERROR(Error, std::string("crmm: ") + allocate_error());
}

// PyTorch's pluggable allocator's free function: crmm_torch_deallocate.
extern "C" __attribute__((visibility("default"))) void crmm_torch_hooks_deallocate(void *ptr, ssize_t size, int device,
                                                                                   cudaStream_t stream)
{
    if (deallocate)
        deallocate(ptr, size, device, reinterpret_cast<crmm_cuda_stream_t>(stream));
}
