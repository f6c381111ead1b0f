"""Resources over memory crmm does not own (docs/architecture.md): Python functions as the
allocator (the ``callback`` plugin), a CUDA memory pool another library made
(``cuda_async_view``), and system memory for devices that access pageable memory
(``system``, ``sam_headroom``)."""

import ctypes
import numbers

from ... import _lib
from ..._host import pointer_arg, size_arg
from ..._lib import lib
from ..stream import DEFAULT_STREAM, PER_THREAD_DEFAULT_STREAM, _view_of
from ._memory_resource import PLUGIN_CLASSES, MemoryResource, _control

__all__ = [
    "CallbackMemoryResource",
    "CudaAsyncViewMemoryResource",
    "SystemMemoryResource",
    "SamHeadroomMemoryResource",
]

# crmm_callback_allocate_fn and crmm_callback_deallocate_fn (crmm/callback.h)
_ALLOCATE_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)
_DEALLOCATE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)

# Trampolines of callback resources whose C resource outlived the Python object (held by an
# adaptor, a device buffer or a device's slot): C may still call them, so they stay alive.
_orphaned_trampolines = []


def _stream_for(handle, _default=DEFAULT_STREAM, _per_thread=PER_THREAD_DEFAULT_STREAM, _view_of=_view_of):
    """The Stream a callback gets for the cudaStream_t C passed (a view for other streams). Its
    names are bound as arguments: a buffer freed at interpreter exit calls it after the module's
    globals are gone."""
    if not handle:
        return _default
    if handle == _per_thread.handle:
        return _per_thread
    return _view_of(handle)


def _is_integer(value):
    """An integer of another type than int (NumPy's register as numbers.Integral; numpy.bool_
    does not, and bool is no address)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class CallbackMemoryResource(MemoryResource):
    """Python functions as the allocator (the ``callback`` plugin; RMM's class of that name).

    ``allocate_func(nbytes, stream)`` returns the address of `nbytes` of memory for use on
    `stream` (a Stream) as an int, aligned to 256 bytes; ``deallocate_func(ptr, nbytes,
    stream)`` frees it. The functions are kept alive as long as the C resource is.

    An exception raised by allocate_func fails the allocation: the call that allocated
    (MemoryResource.allocate, DeviceBuffer) raises it, a MemoryError or RuntimeError as it is and
    any other as a RuntimeError with its message (as RMM does). An exception raised by
    deallocate_func cannot stop the free: it goes to sys.unraisablehook (printed, as an
    exception in __del__ is). A return value that is not an int address fails the allocation
    with RuntimeError (an integer of another type, a NumPy uint64 say, is taken as its value); 0 is
    out of memory (MemoryError). Raises TypeError when either function
    is not callable.
    """

    def __init__(self, allocate_func, deallocate_func):
        self._ptr = None
        for name, func in (("allocate_func", allocate_func), ("deallocate_func", deallocate_func)):
            if not callable(func):
                raise TypeError(f"{name} must be callable, not {type(func).__name__}")

        def allocate(nbytes, stream, _arg, _stream_for=_stream_for, _take=_lib.take_callback_error):
            try:
                ptr = allocate_func(nbytes, _stream_for(stream))
                if not isinstance(ptr, int) and _is_integer(ptr):
                    ptr = ptr.__index__()  # a NumPy integer, as RMM's uintptr_t cast takes it
                if isinstance(ptr, bool) or not isinstance(ptr, int):
                    raise TypeError(f"allocate_func returned {type(ptr).__name__}, not an int address")
                ptr = pointer_arg(ptr, "the address allocate_func returned")
            except BaseException as e:  # C cannot carry it: the failing call raises it
                _lib.stash_callback_error(e)
                return None
            if ptr:
                # an exception left by an earlier attempt was recovered from (a pool that halves
                # its growth and asks again): it is not the error of a later call that fails
                _take()
            return ptr

        def deallocate(ptr, nbytes, stream, _arg, _stream_for=_stream_for):
            # an exception cannot stop the free: ctypes hands it to sys.unraisablehook
            deallocate_func(ptr or 0, nbytes, _stream_for(stream))

        self._allocate_func, self._deallocate_func = allocate_func, deallocate_func
        self._trampolines = (_ALLOCATE_FN(allocate), _DEALLOCATE_FN(deallocate))
        addresses = [ctypes.cast(t, ctypes.c_void_p).value for t in self._trampolines]
        super().__init__("callback", {"allocate_fn": addresses[0], "deallocate_fn": addresses[1]})

    # every name bound as an argument: at interpreter exit this may run after the module's
    # globals are gone
    def __del__(self, _release=lib.crmm_resource_release, _refcount=lib.crmm_resource_refcount,
                _keep=_lib.keep_forever, _kept=_orphaned_trampolines):
        trampolines = getattr(self, "_trampolines", None)
        ptr = getattr(self, "_ptr", None)
        if trampolines is not None and ptr and _refcount(ptr) > 1:
            _keep((trampolines, self._allocate_func, self._deallocate_func), _kept)
        super().__del__(_release)


_VIEW_GET_POOL = _lib.OPS["CRMM_CUDA_ASYNC_VIEW_OP_GET_POOL"]


def _pool_address(pool_handle):
    """A cudaMemPool_t given as an int, or as cuda.bindings' cudaMemPool_t / CUmemoryPool (whose
    int() is the handle; their getPtr() is the address of the object's storage, not the pool).
    Raises ValueError for anything else (RMM's exception)."""
    if not isinstance(pool_handle, int) and callable(getattr(pool_handle, "getPtr", None)):
        pool_handle = int(pool_handle)
    if isinstance(pool_handle, bool) or not isinstance(pool_handle, int):
        raise ValueError(
            f"pool_handle must be a cudaMemPool_t, a CUmemoryPool or an int address, not {type(pool_handle).__name__}"
        )
    if not 0 < pool_handle < 1 << 64:
        raise ValueError(f"pool_handle {pool_handle:#x} is not a memory pool's address")
    return pool_handle


class CudaAsyncViewMemoryResource(MemoryResource):
    """cudaMallocFromPoolAsync from a CUDA memory pool the caller created and keeps owning (the
    ``cuda_async_view`` plugin; RMM's class of that name). The pool must outlive the resource
    and every block allocated from it. Raises ValueError for a pool_handle that is not a pool
    (0, None, another type), UnsupportedError when the device has no memory pools, CudaError
    without a device."""

    def __init__(self, pool_handle):
        self._ptr = None
        super().__init__("cuda_async_view", {"pool_handle": _pool_address(pool_handle)})

    def pool_handle(self):
        """The pool's cudaMemPool_t as an int."""
        pool = ctypes.c_void_p()
        _control(self, b"cuda_async_view", _VIEW_GET_POOL, ctypes.byref(pool))
        return pool.value or 0


class SystemMemoryResource(MemoryResource):
    """System memory (aligned_alloc/free) used by the device directly (the ``system`` plugin;
    RMM's class of that name): needs a device that accesses pageable memory coherently (HMM or
    ATS). Raises UnsupportedError naming cudaDevAttrPageableMemoryAccess on a device without
    it, CudaError without a device."""

    def __init__(self):
        self._ptr = None
        super().__init__("system")


class SamHeadroomMemoryResource(MemoryResource):
    """System memory placed on the device up to its free memory less `headroom` bytes, on the
    host beyond (the ``sam_headroom`` plugin; RMM's class of that name). Same device needs as
    SystemMemoryResource. Raises TypeError for a headroom that is not an int, ValueError for a
    negative one, OverflowError past 64 bits."""

    def __init__(self, headroom):
        self._ptr = None
        super().__init__("sam_headroom", {"headroom": size_arg(headroom, "headroom")})


PLUGIN_CLASSES.update(
    {
        "callback": CallbackMemoryResource,
        "cuda_async_view": CudaAsyncViewMemoryResource,
        "system": SystemMemoryResource,
        "sam_headroom": SamHeadroomMemoryResource,
    }
)
