"""CuPy allocator: ``cupy.cuda.set_allocator(crmm.allocators.cupy.rmm_cupy_allocator)`` makes
CuPy's arrays live in DeviceBuffers from the current device's crmm resource, allocated on
CuPy's current stream. Each array's memory is owned by its DeviceBuffer and freed with it.

The module imports without CuPy (so a caller can import it and skip); the allocator then raises
ModuleNotFoundError naming cupy when it is called."""

try:
    import cupy
except ImportError:
    cupy = None

from .. import _alloc, _lib
from ..pylibrmm.device_buffer import DeviceBuffer
from ..pylibrmm.stream import DEFAULT_STREAM, LEGACY_DEFAULT_STREAM, PER_THREAD_DEFAULT_STREAM, Stream

# CuPy captures streams (cupy.cuda.Graph): the pool must ask whether they are (docs/cuda-graphs.md)
_lib.lib.crmm_graph_capture_enable(True)

__all__ = ["rmm_cupy_allocator", "crmm_cupy_allocator"]

# CuPy's default streams (cudaStream_t 0, cudaStreamLegacy, cudaStreamPerThread) as crmm's
# Streams that live as long as the process: no stream view to make and free per allocation.
_DEFAULT_STREAMS = {0: DEFAULT_STREAM, 1: LEGACY_DEFAULT_STREAM, 2: PER_THREAD_DEFAULT_STREAM}
_uninitialized = DeviceBuffer._uninitialized
_ops = _alloc.ops
if cupy is not None:
    _UnownedMemory, _MemoryPointer = cupy.cuda.UnownedMemory, cupy.cuda.memory.MemoryPointer


def _allocate(nbytes):
    """A cupy.cuda.MemoryPointer to `nbytes` of crmm memory (a DeviceBuffer owns it), allocated
    on CuPy's current stream. Raises ModuleNotFoundError without CuPy."""
    if cupy is None:
        raise ModuleNotFoundError("No module named 'cupy': rmm_cupy_allocator needs CuPy", name="cupy")
    cupy_stream = cupy.cuda.get_current_stream()
    stream = _DEFAULT_STREAMS.get(cupy_stream.ptr)
    if _lib.callback_errors_stashed:
        _lib.drop_stale_callback_error()
    if stream is not None and nbytes and type(nbytes) is int and _lib.initialized:
        # a default stream lives as long as the process: the DeviceBuffer that owns the memory,
        # and CuPy's objects around it, made in one call
        return _ops.create_wrapped(nbytes, stream._cstream, None, _UnownedMemory, _MemoryPointer, DeviceBuffer, stream)
    if stream is None:
        stream = Stream(obj=cupy_stream)  # the buffer keeps CuPy's stream alive until its free
    buf = _uninitialized(nbytes, stream)
    owner = buf._buf
    ptr = owner.ptr()
    device_id = owner.device() if ptr else cupy.cuda.device.get_device_id()
    size = nbytes if type(nbytes) is int else owner.size()
    mem = cupy.cuda.UnownedMemory(ptr, size, buf, device_id)
    return cupy.cuda.memory.MemoryPointer(mem, 0)


# With crmm's C extension, an allocation on a default stream is one C call from CuPy's call of
# the allocator to the MemoryPointer it gets back (no Python frame); every other call (another
# stream, size 0, before libcrmm has a config) runs _allocate.
# Its memory object is CuPy's BaseMemory subclassed in C, owning the buffer itself, where CuPy's
# BaseMemory holds no objects (else UnownedMemory around a DeviceBuffer, as _allocate makes). Where
# the extension found where CuPy keeps the memory's and the MemoryPointer's fields (checked at run
# time, crmm/_fastalloc.c), it writes them directly instead of going through CuPy's properties and
# constructor.
def _c_memory_type():
    try:
        return _alloc.extension.cupy_memory_type(cupy.cuda.memory.BaseMemory, DeviceBuffer)
    except (AttributeError, TypeError):
        return _UnownedMemory


if cupy is not None and _alloc.extension is not None:
    rmm_cupy_allocator = _alloc.extension.cupy_allocator(
        cupy.cuda.get_current_stream, {ptr: (s, s._cstream) for ptr, s in _DEFAULT_STREAMS.items()},
        _c_memory_type(), _MemoryPointer, DeviceBuffer, None, _lib, _allocate)
else:
    rmm_cupy_allocator = _allocate
crmm_cupy_allocator = rmm_cupy_allocator
