// Stand-in for PyTorch's torch/csrc/cuda/CUDAPluggableAllocator.h: the pluggable allocator's
// graph-pool and record-stream setters, with the signatures PyTorch gives them, which keep what they are given for
// tests/check_torch_graph_hooks.cpp to call as PyTorch's CUDAGraph would. The test defines
// getCurrentAllocator.
#pragma once
#include <functional>
#include <memory>
#include <utility>
#include <c10/cuda/CUDAStream.h>

namespace c10::cuda {
using CaptureId_t = unsigned long long;
using MempoolId_t = std::pair<CaptureId_t, CaptureId_t>;
namespace CUDACachingAllocator {
struct CUDAAllocator {
    virtual ~CUDAAllocator() = default;
};
} // namespace CUDACachingAllocator
} // namespace c10::cuda

namespace torch::cuda::CUDAPluggableAllocator {
using BeginFn = std::function<void(int, c10::cuda::MempoolId_t, std::function<bool(cudaStream_t)>)>;
using PoolFn = std::function<void(int, c10::cuda::MempoolId_t)>;
using RecordStreamFn = std::function<void(void *ptr, cudaStream_t stream)>;
struct CUDAPluggableAllocator : public c10::cuda::CUDACachingAllocator::CUDAAllocator {
    void set_begin_allocate_to_pool(BeginFn f) { begin = std::move(f); }
    void set_end_allocate_to_pool_fn(PoolFn f) { end = std::move(f); }
    void set_release_pool(PoolFn f) { release = std::move(f); }
    void set_record_stream_fn(RecordStreamFn f) { record_stream = std::move(f); }
    BeginFn begin;
    PoolFn end, release;
    RecordStreamFn record_stream;
};
std::shared_ptr<c10::cuda::CUDACachingAllocator::CUDAAllocator> getCurrentAllocator();
} // namespace torch::cuda::CUDAPluggableAllocator
