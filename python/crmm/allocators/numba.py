"""Numba external memory manager: ``numba.cuda.set_memory_manager(RMMNumbaManager)``, or
``NUMBA_CUDA_MEMORY_MANAGER=crmm.allocators.numba`` in the environment, makes Numba's device
arrays live in memory from the current device's crmm resource, each allocation a crmm buffer
that its CrmmMemoryPointer frees when it goes (docs/python.md)."""

import ctypes
import functools

from numba import cuda
from numba.cuda import HostOnlyCUDAMemoryManager, IpcHandle, MemoryPointer
from numba.cuda.cudadrv import driver as _driver

from .. import _alloc, _lib
from .._alloc import ops as _ops
from .._host import size_arg
from ..pylibrmm.device_buffer import _SIZE_END, _resource_handle
from ..pylibrmm.stream import DEFAULT_STREAM

# Numba captures streams too: the pool must ask whether they are (docs/cuda-graphs.md)
_lib.lib.crmm_graph_capture_enable(True)

__all__ = ["RMMNumbaManager", "CrmmNumbaManager", "CrmmMemoryPointer"]

_DEFAULT_CSTREAM = DEFAULT_STREAM._cstream  # the stream RMM's plugin allocates on (lives with the process)


def _nvidia_binding():
    """True when Numba drives CUDA through NVIDIA's cuda-python bindings (always, in the
    numba-cuda releases that dropped the ctypes binding and its USE_NV_BINDING switch)."""
    return getattr(_driver, "USE_NV_BINDING", True)


# A device address as the pointer type of Numba's CUDA binding (chosen once: the binding is
# fixed when Numba is imported).
_device_pointer = _driver.binding.CUdeviceptr if _nvidia_binding() else ctypes.c_uint64


class CrmmMemoryPointer(MemoryPointer):
    """Numba's MemoryPointer over crmm memory it owns: the buffer is freed when the pointer goes
    (or at ``free()``, Numba's explicit free; a second ``free()`` raises RuntimeError as Numba's
    does). Numba's own pointer would need a finalizer, which costs a ``weakref.finalize`` and a
    table entry on every allocation; this one holds its buffer instead. Made by memalloc."""

    # MemoryPointer.__init__'s fields, as it sets them for a pointer with a finalizer: those that
    # are the same for every pointer are the class's (own() raises refct on the instance)
    is_managed = True
    refct = 1
    _owner = None

    def __init__(self, context, pointer, size, buffer):
        self.context = context
        self.device_pointer = self.handle = pointer
        self.size = self._cuda_memsize_ = size
        self._crmm_buffer = buffer

    def free(self):
        """Free the memory now (RuntimeError when it was freed already)."""
        if not self._crmm_buffer.address:
            raise RuntimeError("Freeing dead memory")
        self._crmm_buffer.free()


def _memory_pointer(context, size, mr=None):
    """A CrmmMemoryPointer to `size` bytes from `mr` (None: the current device's resource),
    allocated on the default stream as RMM's plugin allocates them."""
    if type(size) is not int or not 0 <= size < _SIZE_END:
        size = size_arg(size, "size")
    handle = None if mr is None else _resource_handle(mr)
    if not _lib.initialized:
        _lib.ensure_initialized()
    _lib.drop_stale_callback_error()
    buffer = _ops.create(size, _DEFAULT_CSTREAM, handle)
    return CrmmMemoryPointer(context, _device_pointer(buffer.ptr()), size, buffer)


class RMMNumbaManager(HostOnlyCUDAMemoryManager):
    """Numba EMM plugin: device memory from crmm, host memory from Numba."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if _alloc.extension is not None:
            # memalloc's common case in one C call (crmm/_fastalloc.c); _memory_pointer on this
            # context serves the rest, and the method below is the whole allocator where the
            # extension is not built (or is off). The fallback holds the context, not the
            # manager: the manager holding an allocator that holds the manager would be a
            # cycle, left for the cycle collector with the context it keeps alive.
            self.memalloc = _alloc.extension.numba_allocator(
                CrmmMemoryPointer, _device_pointer, self.context, _DEFAULT_CSTREAM, None, _lib,
                functools.partial(_memory_pointer, self.context))

    def initialize(self):
        pass

    def memalloc(self, size):
        """A CrmmMemoryPointer to `size` bytes of the current device's resource."""
        if type(size) is int and 0 < size < _SIZE_END and _lib.initialized and not _lib.callback_errors_stashed:
            # _memory_pointer's common case, without its call
            buffer = _ops.create(size, _DEFAULT_CSTREAM, None)
            return CrmmMemoryPointer(self.context, _device_pointer(buffer.ptr()), size, buffer)
        return _memory_pointer(self.context, size)

    def get_ipc_handle(self, memory):
        """An IPC handle for `memory`, with its offset inside the allocation it lies in (CUDA's
        legacy IPC, as RMM's plugin: the whole allocation is shared). Raises Numba's
        CudaAPIError when the driver refuses: memory of crmm's expandable pool, mapped page by
        page, is exported with crmm.ipc.export instead (docs/ipc.md)."""
        start, _end = cuda.cudadrv.driver.device_extents(memory)

        def refused(err):
            return _driver.CudaAPIError(
                err,
                f"cuIpcGetMemHandle refused the allocation at {int(start):#x} ({getattr(err, 'name', err)}): "
                "legacy CUDA IPC exports cudaMalloc's allocations only, and crmm's expandable pool maps its "
                "memory page by page; export it with crmm.ipc.export (docs/ipc.md)",
            )

        if _nvidia_binding():
            err, ipc_handle = _driver.binding.cuIpcGetMemHandle(start)
            if err != _driver.binding.CUresult.CUDA_SUCCESS:
                raise refused(err)
            offset = int(memory.handle) - int(start)
        else:
            ipc_handle = (ctypes.c_byte * 64)()
            try:  # Numba's ctypes wrapper raises on an error itself
                cuda.cudadrv.driver.driver.cuIpcGetMemHandle(ctypes.byref(ipc_handle), start)
            except _driver.CudaAPIError as e:
                raise refused(e.code) from e
            offset = memory.handle.value - start
        source_info = cuda.current_context().device.get_device_identity()
        return IpcHandle(memory, ipc_handle, memory.size, source_info, offset=offset)

    def get_memory_info(self):
        """Not known: the resource (a pool, say) decides what is free."""
        raise NotImplementedError("crmm's resource decides what memory is free")

    @property
    def interface_version(self):
        return 1


CrmmNumbaManager = RMMNumbaManager

# NUMBA_CUDA_MEMORY_MANAGER=crmm.allocators.numba picks this class.
_numba_memory_manager = RMMNumbaManager
