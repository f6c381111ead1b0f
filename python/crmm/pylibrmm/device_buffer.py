"""Device buffers and copies: rmm.pylibrmm.device_buffer over libcrmm's crmm_device_buffer.

A DeviceBuffer is untyped device memory from a crmm memory resource (the current device's
unless ``mr`` is given), freed on its stream when the object goes away. Streams: a copy on a
default stream has finished when the call returns; on any other stream it is queued, and the
caller keeps host memory alive and unchanged until that stream is synchronized.
"""

import ctypes
import math
import threading

import numpy as np

from .. import _lib
from .._alloc import ops as _ops
from .._host import address, host_view, pointer_arg, size_arg
from .._lib import check, lib
from .memory_resource import MemoryResource
from .stream import DEFAULT_STREAM, Stream, as_stream

_SIZE_END = 1 << 64

# resize, reserve and shrink_to_fit replace a buffer's memory; ctypes lets go of the GIL during
# the call, so two threads changing one buffer at once would both free its old block. RMM runs
# them under the GIL; here they take this lock, one at a time across all buffers (they are rare
# next to allocations). Reentrant: a Python allocator inside one may resize another buffer.
_REPLACE_LOCK = threading.RLock()

# What a DeviceBuffer asks its resource for: its size rounded up to a multiple of this (1: the
# size itself). 16 under install_as_rmm(rmm_version="25.10") or older: up to 25.10 RMM's
# device_buffer allocated through a resource reference that rounded every request up to 16
# bytes, so its statistics and tracking adaptors counted multiples of 16; from 25.12 RMM counts
# the bytes asked for.
_allocation_rounding = 1


def _set_allocation_rounding(multiple):
    """Round each DeviceBuffer's request up to `multiple` bytes (1: not at all); crmm._rmm_alias."""
    global _allocation_rounding
    _allocation_rounding = multiple

__all__ = ["DeviceBuffer", "copy_device_to_ptr", "copy_host_to_ptr", "copy_ptr_to_host", "to_device"]


class HostArray(np.ndarray):
    """The numpy uint8 array copy_to_host returns: a plain ndarray that prints as its repr
    (``array([97, 98, 99], dtype=uint8)``), so that ``print(hb)`` shows what RMM's examples show."""

    def __repr__(self):
        return np.array_repr(self.view(np.ndarray))

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        # pickled as the plain ndarray it is: loadable where crmm is not installed, and handed
        # out of band under protocol 5 as an ndarray is
        return self.view(np.ndarray).__reduce_ex__(protocol)


def _host_array(nbytes):
    return np.empty(nbytes, dtype=np.uint8).view(HostArray)


def _stream_ptr(stream):
    return as_stream(stream)._cstream


def _resource_handle(mr):
    """The crmm_resource * of a MemoryResource argument (TypeError for anything else)."""
    if not isinstance(mr, MemoryResource):
        raise TypeError(f"mr must be a MemoryResource, not {type(mr).__name__}")
    return mr._handle


class _NotADeviceArrayError(TypeError, ValueError):
    """An object given as device memory has no __cuda_array_interface__: a ValueError, as RMM
    raises it, and a TypeError, for callers that catch the type error."""


def _device_array_pointer(obj):
    """(address, nbytes) of device memory given as a DeviceBuffer or an object with
    ``__cuda_array_interface__`` (C-contiguous)."""
    if isinstance(obj, DeviceBuffer):
        return obj.ptr, obj.size
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is None:
        # RMM's words first: code written for RMM may match them
        raise _NotADeviceArrayError(
            "Expected object to support `__cuda_array_interface__` protocol "
            f"(a DeviceBuffer or an object with __cuda_array_interface__), not {type(obj).__name__}"
        )
    shape = tuple(size_arg(dim, "an extent of the device array's shape") for dim in iface["shape"])
    itemsize = np.dtype(iface["typestr"]).itemsize
    # in Python ints: a product wrapped to 64 bits would be a wrong count (2**64 bytes: 0)
    count = math.prod(shape)
    strides = iface.get("strides")
    if strides is not None and count > 1:
        expected = itemsize
        for dim, stride in zip(reversed(shape), reversed(strides)):
            if dim > 1 and stride != expected:
                raise ValueError("the device array must be C-contiguous")
            expected *= dim
    # an int address, as RMM converts it to uintptr_t (never cut to 64 bits nor read from text)
    return pointer_arg(iface["data"][0], "the device array's data pointer"), count * itemsize


class DeviceBuffer:
    """A buffer of device memory from a crmm memory resource.

    Parameters
    ----------
    ptr : int, optional
        Address of data (device or host memory) to copy into the new buffer; ``size`` bytes.
        0 is no data, as None.
    size : int, optional
        Size of the buffer in bytes (default 0). Without ``ptr`` the new memory is zero-filled
        on ``stream`` without waiting: work queued on that stream afterwards (the copies of this
        class included) sees zeros, never what the memory held before. Other streams and the host
        order themselves behind ``stream`` first, as for any stream-ordered allocation.
    stream : Stream, optional
        The stream of the allocation and the copy (default: the default stream).
    mr : MemoryResource, optional
        The resource to allocate from (default: the current device's). A host-only resource is
        refused with InvalidArgumentError.

    Raises OutOfMemoryError (a MemoryError) when the resource has no room, CudaError without a
    device.
    """

    # _buf: the owner of the crmm_device_buffer (crmm/_alloc.py), which frees it when the buffer
    # goes away (no __del__ here: its call would cost more than the free); None once freed.
    __slots__ = ("_buf", "_stream", "_mr", "__weakref__")

    def __init__(self, *, ptr=None, size=0, stream=DEFAULT_STREAM, mr=None):
        self._buf = None
        self._init(size, stream, mr, ptr)

    def _init(self, size, stream, mr, src=None):
        # the checks cost a type test each where the arguments are what they usually are
        if type(size) is not int or not 0 <= size < _SIZE_END:
            size = size_arg(size, "size")
        if type(stream) is not Stream:
            stream = as_stream(stream)
        handle = None if mr is None else _resource_handle(mr)
        if src is not None:
            # a NULL ptr is no data to copy: a buffer as without ptr (RMM's ptr defaults to 0
            # and allocates `size` bytes for it)
            src = pointer_arg(src, "ptr") or None
        if not _lib.initialized:
            _lib.ensure_initialized()
        # under RMM 25.10's rounding the block is asked for at the rounded size, then the buffer
        # made `size` long in it (a capacity of the rounded size)
        rounded = size
        if _allocation_rounding != 1 and size % _allocation_rounding:
            rounded = size + _allocation_rounding - size % _allocation_rounding
        _lib.drop_stale_callback_error()
        if size and src is None:
            # the zeros are queued on the stream, before whatever the caller queues there next
            # (as torch.zeros and cupy.zeros do): no wait for the GPU
            cuda_stream = None if stream is DEFAULT_STREAM else stream.handle or None
            self._buf = _ops.create_zeroed(rounded, stream._cstream, handle, cuda_stream, False)
        else:
            self._buf = _ops.create(rounded, stream._cstream, handle)
            if src is not None and size:
                check(lib.crmm_device_buffer_copy_from_device(self._buf, src, size, stream._cstream))
        if rounded != size:
            check(lib.crmm_device_buffer_resize(self._buf, size, stream._cstream))
        self._stream = stream
        self._mr = mr

    @classmethod
    def _uninitialized(cls, size, stream=DEFAULT_STREAM, mr=None):
        """A buffer whose memory is not filled (for allocators, where the caller writes it).
        The checks of _init, written out: this is every CuPy and Numba allocation."""
        if type(size) is not int or not 0 <= size < _SIZE_END:
            size = size_arg(size, "size")
        if type(stream) is not Stream:
            stream = as_stream(stream)
        handle = None if mr is None else _resource_handle(mr)
        if not _lib.initialized:
            _lib.ensure_initialized()
        db = cls.__new__(cls)
        if _lib.callback_errors_stashed:
            _lib.drop_stale_callback_error()
        db._buf = _ops.create(size, stream._cstream, handle)
        db._stream = stream
        db._mr = mr
        return db

    @classmethod
    def _adopt(cls, cbuf, stream):
        """A buffer owning `cbuf`, a crmm_device_buffer * (an int) another libcrmm call made."""
        db = cls.__new__(cls)
        db._buf, db._stream, db._mr = _ops.adopt(cbuf), stream, None
        return db

    @property
    def _cbuf(self):
        """The owner of the crmm_device_buffer * (ctypes takes it for the pointer), or StateError
        for a buffer that holds none (made with __new__ alone, or freed)."""
        buf = getattr(self, "_buf", None)
        if not buf:
            raise _lib.error_for(10, "this DeviceBuffer was freed; it cannot be used")
        return buf

    # ---- properties ----------------------------------------------------------------------

    @property
    def ptr(self):
        """Address of the memory as an int (0 for a size-0 buffer)."""
        return self._cbuf.ptr()

    @property
    def size(self):
        """Size of the buffer in bytes."""
        return self._cbuf.size()

    @property
    def nbytes(self):
        """Size of the buffer in bytes."""
        return self.size

    def capacity(self):
        """Bytes allocated (at least size)."""
        return int(lib.crmm_device_buffer_capacity(self._cbuf))

    @property
    def device(self):
        """The device the memory belongs to."""
        return self._cbuf.device()

    @property
    def mr(self):
        """The memory resource the buffer allocates from."""
        return MemoryResource._adopt(lib.crmm_resource_retain(lib.crmm_device_buffer_resource(self._cbuf)))

    @property
    def stream(self):
        """The buffer's stream, where its memory is freed: the one it was made with, or the last
        one given to resize, reserve or shrink_to_fit (as in RMM, copies leave it alone)."""
        return self._stream

    def __len__(self):
        return self.size

    def __sizeof__(self):
        return self.size

    @property
    def __cuda_array_interface__(self):
        return {
            "data": (self.ptr, False),
            "shape": (self.size,),
            "strides": None,
            "typestr": "|u1",
            "version": 0,
        }

    def __repr__(self):
        if not getattr(self, "_buf", None):  # repr must not raise: it shows in tracebacks and logs
            return "<crmm DeviceBuffer (freed)>"
        return f"<crmm DeviceBuffer size={self.size} ptr=0x{self.ptr:x}>"

    # ---- size and capacity ---------------------------------------------------------------

    def _set_stream(self, stream):
        stream = as_stream(stream)
        cstream = stream._cstream  # a released stream raises here, before the buffer takes it
        self._stream = stream
        return cstream

    def resize(self, new_size, stream=DEFAULT_STREAM):
        """Change the size to `new_size` bytes, keeping the contents up to the smaller size
        (new bytes are uninitialized)."""
        new_size = size_arg(new_size, "new_size")
        with _REPLACE_LOCK:
            check(lib.crmm_device_buffer_resize(self._cbuf, new_size, self._set_stream(stream)))

    def reserve(self, new_capacity, stream=DEFAULT_STREAM):
        """Grow the capacity to at least `new_capacity` bytes; the size stays."""
        new_capacity = size_arg(new_capacity, "new_capacity")
        with _REPLACE_LOCK:
            check(lib.crmm_device_buffer_reserve(self._cbuf, new_capacity, self._set_stream(stream)))

    def shrink_to_fit(self, stream=DEFAULT_STREAM):
        """Make the capacity equal to the size."""
        with _REPLACE_LOCK:
            check(lib.crmm_device_buffer_shrink_to_fit(self._cbuf, self._set_stream(stream)))

    def prefetch(self, device=None, stream=None):
        """Start moving the buffer's memory to `device` (default: the current device; -1,
        cudaCpuDeviceId, is the host) on `stream` (default: the buffer's stream), for managed
        memory; nothing for other memory (as RMM). Raises TypeError/ValueError for bad arguments, CudaError when CUDA refuses
        the prefetch for another reason."""
        stream = self._stream if stream is None else as_stream(stream)
        if device is None:
            from .memory_resource import current_device

            device = current_device()
        else:
            from .memory_resource import _device_arg

            device = _device_arg(device)
        if not self.size:
            return
        if _lib.cuda_mem_prefetch is None:
            raise _lib.error_for(8, "libcrmm's CUDA runtime has no cudaMemPrefetchAsync")
        err = _lib.cuda_mem_prefetch(self.ptr, self.size, device, stream.handle or None)
        if err == 1:  # cudaErrorInvalidValue: not managed memory
            _lib.cuda_get_last_error()
        elif err != 0:
            _lib.cuda_get_last_error()
            raise _lib.error_for(4, f"cudaMemPrefetchAsync failed: {_lib.text(_lib.cuda_get_error_string(err))}")

    # ---- copies --------------------------------------------------------------------------

    def copy(self):
        """A deep copy on the buffer's stream, allocated, as RMM's, from the current device's
        resource (RMM builds the copy with its constructor's default resource), which need not
        be the resource of the buffer copied."""
        return DeviceBuffer(ptr=self.ptr, size=self.size, stream=self._stream)

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        # The contents as a plain numpy array: pickle protocol 5 hands it out of band
        # (buffer_callback) instead of copying it into the stream.
        return to_device, (self.copy_to_host().view(np.ndarray),)

    @staticmethod
    def to_device(b, stream=DEFAULT_STREAM):
        """Return a new DeviceBuffer with a copy of the data (any bytes-like object).

        >>> import crmm as rmm
        >>> db = rmm.DeviceBuffer.to_device(b"abc")
        >>> db.size
        3
        """
        return to_device(b, stream)

    def copy_to_host(self, ary=None, stream=DEFAULT_STREAM):
        """Copy the buffer to host memory: into `ary` (a writable buffer of at least size bytes)
        and return it, or into a new numpy uint8 array.

        >>> import crmm as rmm
        >>> rmm.DeviceBuffer.to_device(b"xyz").copy_to_host()
        array([120, 121, 122], dtype=uint8)
        """
        stream = as_stream(stream)
        if ary is None:
            ary = _host_array(self.size)
            view = ary
        else:
            view = host_view(ary, writable=True, name="ary")
            if view.nbytes < self.size:
                raise ValueError(f"ary has {view.nbytes} bytes, the buffer {self.size}")
        check(lib.crmm_device_buffer_copy_to_host(self._cbuf, address(view), view.nbytes, stream._cstream))
        return ary

    def copy_from_host(self, ary, stream=DEFAULT_STREAM):
        """Copy the bytes of host buffer `ary` (at most size bytes) to the start of the buffer."""
        view = host_view(ary, name="ary")
        if view.nbytes > self.size:
            raise ValueError(f"ary has {view.nbytes} bytes, more than the buffer's {self.size}")
        check(lib.crmm_device_buffer_copy_from_host(self._cbuf, address(view), view.nbytes, _stream_ptr(stream)))

    def copy_from_device(self, cuda_ary, stream=DEFAULT_STREAM):
        """Copy device memory (a DeviceBuffer or a C-contiguous object with
        ``__cuda_array_interface__``, at most size bytes) to the start of the buffer."""
        src, nbytes = _device_array_pointer(cuda_ary)
        if nbytes > self.size:
            raise ValueError(f"the source has {nbytes} bytes, more than the buffer's {self.size}")
        check(lib.crmm_device_buffer_copy_from_device(self._cbuf, src or None, nbytes, _stream_ptr(stream)))

    def tobytes(self, stream=DEFAULT_STREAM):
        """The contents as bytes."""
        return self.copy_to_host(stream=stream).tobytes()

    def __bytes__(self):
        return self.tobytes()


def to_device(b, stream=DEFAULT_STREAM):
    """Return a new DeviceBuffer with a copy of the data.

    Parameters
    ----------
    b : buffer
        Host data to copy to device.
    stream : Stream, optional
        CUDA stream to use for copying. Defaults to the default stream.

    Returns
    -------
    DeviceBuffer
        Device buffer containing a copy of the host data.

    Notes
    -----
    If stream is the default stream, it is synchronized after the copy. If a non-default
    stream is provided, the copy is asynchronous. The caller must keep b alive and unmodified
    until the stream is synchronized.

    Examples
    --------
    >>> import crmm as rmm
    >>> db = rmm.pylibrmm.device_buffer.to_device(b"abc")
    >>> print(bytes(db))
    b'abc'
    """
    view = host_view(b, name="b")
    stream = as_stream(stream)
    _lib.ensure_initialized()
    out = ctypes.c_void_p()
    check(lib.crmm_device_buffer_to_device(address(view), view.nbytes, stream._cstream, None, ctypes.byref(out)))
    return DeviceBuffer._adopt(out.value, stream)


def copy_device_to_ptr(d_src, d_dst, count, stream=DEFAULT_STREAM):
    """Copy from a device pointer to a device pointer

    Parameters
    ----------
    d_src : int
        Pointer to device data to copy.
    d_dst : int
        Pointer to device memory to write into.
    count : int
        Number of bytes to copy.
    stream : Stream, optional
        CUDA stream to use for copying. Defaults to the default stream.

    Examples
    --------
    >>> import crmm as rmm
    >>> db = rmm.DeviceBuffer(size=5)
    >>> db2 = rmm.DeviceBuffer.to_device(b"abc")
    >>> rmm.pylibrmm.device_buffer.copy_device_to_ptr(db2.ptr, db.ptr, db2.size)
    >>> hb = db.copy_to_host()
    >>> hb
    array([97, 98, 99,  0,  0], dtype=uint8)
    """
    d_src = pointer_arg(d_src, "d_src")
    d_dst = pointer_arg(d_dst, "d_dst")
    count = size_arg(count, "count")
    check(lib.crmm_copy_device_to_ptr(d_src or None, d_dst or None, count, _stream_ptr(stream)))


def copy_host_to_ptr(hb, db, stream=DEFAULT_STREAM):
    """Copy from a host pointer to a device pointer

    Parameters
    ----------
    hb : buffer
        Host data to copy.
    db : int
        Pointer to device memory to write into.
    stream : Stream, optional
        CUDA stream to use for copying. Defaults to the default stream.

    Notes
    -----
    If stream is the default stream, it is synchronized after the copy. If a non-default
    stream is provided, the copy is asynchronous. The caller must keep hb alive and unmodified
    until the stream is synchronized.

    Examples
    --------
    >>> import crmm as rmm
    >>> db = rmm.DeviceBuffer(size=10)
    >>> hb = b"abc"
    >>> rmm.pylibrmm.device_buffer.copy_host_to_ptr(hb, db.ptr)
    >>> hb = db.copy_to_host()
    >>> print(hb)
    array([97, 98, 99,  0,  0,  0,  0,  0,  0,  0], dtype=uint8)
    """
    view = host_view(hb, name="hb")
    db = pointer_arg(db, "db")
    check(lib.crmm_copy_host_to_ptr(address(view), view.nbytes, db or None, _stream_ptr(stream)))


def copy_ptr_to_host(db, hb, stream=DEFAULT_STREAM):
    """Copy from a device pointer to a buffer on host

    Parameters
    ----------
    db : int
        Pointer to device data to copy.
    hb : writable buffer
        Host buffer to write into.
    stream : Stream, optional
        CUDA stream to use for copying. Defaults to the default stream.

    Notes
    -----
    If stream is the default stream, it is synchronized after the copy. However if a
    non-default stream is provided, this function is fully asynchronous.

    Examples
    --------
    >>> import crmm as rmm
    >>> db = rmm.DeviceBuffer.to_device(b"abc")
    >>> hb = bytearray(db.nbytes)
    >>> rmm.pylibrmm.device_buffer.copy_ptr_to_host(db.ptr, hb)
    >>> print(hb)
    bytearray(b'abc')
    """
    db = pointer_arg(db, "db")
    view = host_view(hb, writable=True, name="hb")
    check(lib.crmm_copy_ptr_to_host(db or None, address(view), view.nbytes, _stream_ptr(stream)))


