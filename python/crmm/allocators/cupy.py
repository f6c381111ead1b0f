"""CuPy allocator: ``cupy.cuda.set_allocator(crmm.allocators.cupy.rmm_cupy_allocator)`` makes
CuPy's arrays live in DeviceBuffers from the current device's crmm resource, allocated on
CuPy's current stream. Each array's memory is owned by its DeviceBuffer and freed with it.

The module imports without CuPy (so a caller can import it and skip); the allocator then raises
ModuleNotFoundError naming cupy when it is called."""

try:
    import cupy
except ImportError:
    cupy = None

from .. import _lib
from ..pylibrmm.device_buffer import DeviceBuffer
from ..pylibrmm.stream import Stream

# CuPy captures streams (cupy.cuda.Graph): the pool must ask whether they are (docs/cuda-graphs.md)
_lib.lib.crmm_graph_capture_enable(True)

__all__ = ["rmm_cupy_allocator", "crmm_cupy_allocator"]


def rmm_cupy_allocator(nbytes):
    """A cupy.cuda.MemoryPointer to `nbytes` of crmm memory (a DeviceBuffer owns it). Raises
    ModuleNotFoundError without CuPy."""
    if cupy is None:
        raise ModuleNotFoundError("No module named 'cupy': rmm_cupy_allocator needs CuPy", name="cupy")
    stream = Stream(obj=cupy.cuda.get_current_stream())
    buf = DeviceBuffer._uninitialized(nbytes, stream=stream)
    device_id = buf.device if buf.ptr else cupy.cuda.device.get_device_id()
    mem = cupy.cuda.UnownedMemory(ptr=buf.ptr, size=buf.size, owner=buf, device_id=device_id)
    return cupy.cuda.memory.MemoryPointer(mem, 0)


crmm_cupy_allocator = rmm_cupy_allocator
