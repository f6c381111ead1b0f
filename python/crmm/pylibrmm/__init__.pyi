from . import (
    cuda_stream_pool as cuda_stream_pool,
    device_buffer as device_buffer,
    logger as logger,
    memory_resource as memory_resource,
    stream as stream,
)
from .cuda_stream_pool import CudaStreamPool as CudaStreamPool
from .device_buffer import DeviceBuffer as DeviceBuffer
from .stream import CudaStreamFlags as CudaStreamFlags, Stream as Stream
