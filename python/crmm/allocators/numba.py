"""Numba external memory manager: ``numba.cuda.set_memory_manager(RMMNumbaManager)``, or
``NUMBA_CUDA_MEMORY_MANAGER=crmm.allocators.numba`` in the environment, makes Numba's device
arrays live in DeviceBuffers from the current device's crmm resource."""

import ctypes

from numba import cuda
from numba.cuda import HostOnlyCUDAMemoryManager, IpcHandle, MemoryPointer
from numba.cuda.cudadrv import driver as _driver

from .. import _lib
from ..pylibrmm.device_buffer import DeviceBuffer

# Numba captures streams too: the pool must ask whether they are (docs/cuda-graphs.md)
_lib.lib.crmm_graph_capture_enable(True)

__all__ = ["RMMNumbaManager", "CrmmNumbaManager"]


def _nvidia_binding():
    """True when Numba drives CUDA through NVIDIA's cuda-python bindings (always, in the
    numba-cuda releases that dropped the ctypes binding and its USE_NV_BINDING switch)."""
    return getattr(_driver, "USE_NV_BINDING", True)


def _device_pointer(address):
    """A device address as the pointer type of Numba's CUDA binding."""
    if _nvidia_binding():
        return _driver.binding.CUdeviceptr(address)
    return ctypes.c_uint64(address)


def _make_finalizer(handle, allocations):
    """Drop the DeviceBuffer of `handle` when Numba frees the memory. After a context reset the
    allocations are already gone: nothing to do then."""

    def finalizer():
        if allocations:
            allocations.pop(handle, None)

    return finalizer


class RMMNumbaManager(HostOnlyCUDAMemoryManager):
    """Numba EMM plugin: device memory from crmm, host memory from Numba."""

    def initialize(self):
        pass

    def memalloc(self, size):
        buf = DeviceBuffer._uninitialized(size)
        address = buf._buf.ptr()
        self.allocations[address] = buf
        return MemoryPointer(self.context, _device_pointer(address), size, finalizer=_make_finalizer(address, self.allocations))

    def get_ipc_handle(self, memory):
        """An IPC handle for `memory`, with its offset inside the crmm block it lies in."""
        start, _end = cuda.cudadrv.driver.device_extents(memory)
        if _nvidia_binding():
            _, ipc_handle = _driver.binding.cuIpcGetMemHandle(start)
            offset = int(memory.handle) - int(start)
        else:
            ipc_handle = (ctypes.c_byte * 64)()
            cuda.cudadrv.driver.driver.cuIpcGetMemHandle(ctypes.byref(ipc_handle), start)
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
