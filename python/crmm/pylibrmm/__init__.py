"""rmm.pylibrmm over libcrmm: streams, the stream pool, device buffers and copies, memory
resources and logging."""

from . import cuda_stream_pool, device_buffer, logger, memory_resource, stream
from .cuda_stream_pool import CudaStreamPool
from .device_buffer import DeviceBuffer
from .stream import CudaStreamFlags, Stream

__all__ = [
    "CudaStreamFlags",
    "CudaStreamPool",
    "DeviceBuffer",
    "Stream",
    "cuda_stream_pool",
    "device_buffer",
    "logger",
    "memory_resource",
    "stream",
]
