"""Resources RMM marks experimental (rmm.mr.experimental): they may change with RMM."""

import ctypes

from ... import _lib
from ._memory_resource import PLUGIN_CLASSES, MemoryResource, _control

__all__ = ["CudaAsyncManagedMemoryResource"]

_ASYNC_MANAGED_GET_POOL = _lib.OPS["CRMM_ASYNC_MANAGED_OP_GET_POOL"]


class CudaAsyncManagedMemoryResource(MemoryResource):
    """Stream-ordered managed memory from the device's default managed memory pool (the
    ``async_managed`` plugin; RMM's class of that name). Needs a CUDA 13 driver and a device
    with memory pools: raises UnsupportedError otherwise, CudaError without a device."""

    def __init__(self):
        self._ptr = None
        super().__init__("async_managed")

    def pool_handle(self):
        """The managed pool's cudaMemPool_t as an int (the driver's: do not destroy it)."""
        pool = ctypes.c_void_p()
        _control(self, b"async_managed", _ASYNC_MANAGED_GET_POOL, ctypes.byref(pool))
        return pool.value or 0


PLUGIN_CLASSES["async_managed"] = CudaAsyncManagedMemoryResource
