// Stand-in for PyTorch's c10/cuda/CUDAStream.h: the names crmm's graph-pool hooks use, so that
// tests/check_torch_graph_hooks.cpp compiles them without PyTorch or CUDA. The test defines
// getCurrentCUDAStream.
#pragma once
typedef struct CUstream_st *cudaStream_t;
#define cudaStreamLegacy ((cudaStream_t)0x1)

namespace c10 {
using DeviceIndex = signed char;
namespace cuda {
struct CUDAStream {
    cudaStream_t s;
    cudaStream_t stream() const { return s; }
};
CUDAStream getCurrentCUDAStream(DeviceIndex device = -1);
} // namespace cuda
} // namespace c10
