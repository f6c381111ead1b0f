"""CUDA streams: rmm.pylibrmm.stream over libcrmm's crmm_stream.

A Stream is one of: a new CUDA stream it owns (Stream(), destroyed with the object), a view of
a stream another library made (Stream(obj) for a CuPy, Numba or PyTorch stream, any object with
the CUDA stream protocol ``__cuda_stream__``, or an integer cudaStream_t handle: the object is
kept alive with the view and never destroyed by it), or one of the default streams below.
"""

import ctypes
import weakref
from enum import IntEnum

from .._errors import StateError
from .._handles import HandleOwner
from .._host import pointer_arg
from .._lib import check, lib

__all__ = [
    "CudaStreamFlags",
    "Stream",
    "DEFAULT_STREAM",
    "LEGACY_DEFAULT_STREAM",
    "PER_THREAD_DEFAULT_STREAM",
]


class CudaStreamFlags(IntEnum):
    """Enumeration of CUDA stream creation flags.

    Attributes
    ----------
    SYNC_DEFAULT : int
        Created stream synchronizes with the default stream.
    NON_BLOCKING : int
        Created stream does not synchronize with the default stream.
    """

    SYNC_DEFAULT = 0
    NON_BLOCKING = 1


def _flags_arg(flags):
    if flags is None:
        return CudaStreamFlags.SYNC_DEFAULT
    if isinstance(flags, bool) or not isinstance(flags, int):
        raise TypeError(f"flags must be a CudaStreamFlags, not {type(flags).__name__}")
    try:
        return CudaStreamFlags(flags)
    except ValueError:
        raise ValueError(f"flags must be CudaStreamFlags.SYNC_DEFAULT or NON_BLOCKING, not {flags!r}") from None


def _protocol_handle(obj, protocol):
    version, handle = protocol() if callable(protocol) else protocol
    if version != 0:
        raise NotImplementedError(f"crmm does not support the CUDA Stream Protocol version: '{version}' (only 0)")
    # an int address, as RMM converts it to uintptr_t: never cut to 64 bits (2**64 would be
    # stream 0) nor read from text or a float
    return pointer_arg(handle, "the __cuda_stream__ handle")


def foreign_handle(obj):
    """The cudaStream_t of a stream object of another library (or of an int handle)."""
    if isinstance(obj, bool):
        raise TypeError("Cannot create stream from bool")
    if isinstance(obj, int):
        if obj < 0 or obj >= 1 << 64:
            raise ValueError(f"a stream handle is an address, not {obj}")
        return obj
    protocol = getattr(obj, "__cuda_stream__", None)
    if protocol is not None:
        return _protocol_handle(obj, protocol)
    package = (type(obj).__module__ or "").split(".")[0]
    if package == "torch" and hasattr(obj, "cuda_stream"):
        return int(obj.cuda_stream)
    if package == "cupy" and hasattr(obj, "ptr"):
        return int(obj.ptr)
    if package in ("numba", "numba_cuda"):
        return int(obj)
    raise TypeError(f"Cannot create stream from {type(obj)}")


# cudaStream_t 0 and cudaStreamLegacy: the streams RMM's Stream.is_default() is true for.
_LEGACY_DEFAULT_HANDLES = (0, 1)


class Stream(HandleOwner):
    """A CUDA stream.

    Parameters
    ----------
    obj : optional
        None (the default) creates a new CUDA stream on the current device, owned by this
        object. A Stream, a CuPy, Numba or PyTorch stream, an object with ``__cuda_stream__``,
        or an int cudaStream_t wraps that stream without owning it (the object is kept alive).
    flags : CudaStreamFlags, optional
        Creation flags of a new stream (SYNC_DEFAULT when None); only with ``obj=None``.

    copy.copy and copy.deepcopy give a view of the same CUDA stream that keeps this object (and
    so the stream) alive; pickling raises TypeError. Released by hand (``__del__``), the object
    and every view of it raise StateError wherever a stream is taken.
    """

    # _cstream: the crmm_stream * as an int, a plain attribute (every allocation reads it);
    # _owner: what keeps the CUDA stream alive (a Stream this one views, a CudaStreamPool,
    # another library's stream object) or None; _destroy: whether releasing this object
    # destroys the crmm_stream (a new stream, or a view of another library's); _views: the
    # Streams viewing this one (a weak set, made with the first), released with it.
    # Released (its __del__ called, by hand or by Python, or its owner's), the object becomes a
    # _ReleasedStream, whose every use raises StateError: libcrmm reads NULL as the default
    # stream, so a released stream passed on would queue the work there instead, and a view of
    # a destroyed one would hand it freed memory.

    def __init__(self, obj=None, flags=None):
        if "_cstream" in self.__dict__:  # made already: re-making it would leak or orphan its stream
            raise StateError("this Stream is already made; __init__ cannot make it again", "CRMM_ERROR_STATE")
        self._cstream = None
        self._owner = None
        self._destroy = False
        if flags is not None and obj is not None:
            raise ValueError("flags may only be specified when obj is None (they apply to a new stream)")
        if obj is None:
            out = ctypes.c_void_p()
            check(lib.crmm_stream_create(int(_flags_arg(flags)), ctypes.byref(out)))
            self._cstream, self._destroy = out.value, True
        elif isinstance(obj, Stream):
            self._cstream, self._owner = obj._cstream, obj
            obj._add_view(self)
        else:
            handle = foreign_handle(obj)
            out = ctypes.c_void_p()
            check(lib.crmm_stream_view(handle, ctypes.byref(out)))
            self._cstream, self._owner, self._destroy = out.value, obj, True

    @classmethod
    def _from_cstream(cls, cstream, owner=None, destroy=False):
        """Wrap a crmm_stream * (destroyed with the object when `destroy`)."""
        s = cls.__new__(cls)
        s._cstream, s._owner, s._destroy = cstream, owner, destroy
        return s

    def _add_view(self, view):
        """Release `view` (a Stream over this one's stream) when this one is released."""
        views = self.__dict__.get("_views")
        if views is None:
            views = self._views = weakref.WeakSet()
        views.add(view)

    def _release(self):
        """Make this object and the Streams viewing it _ReleasedStreams (destroying nothing)."""
        views = self.__dict__.pop("_views", None)
        try:
            self.__class__ = _ReleasedStream
        except TypeError:  # a subclass with a layout of its own: NULL, as before it was released
            self.__dict__["_cstream"] = None
        for view in list(views or ()):
            view._release()

    def __copy__(self):
        return Stream(self)

    def __deepcopy__(self, memo):
        return Stream(self)

    def __del__(self, _destroy_fn=lib.crmm_stream_destroy):
        """Release the object: destroy the crmm_stream it owns; any later use of it, or of a
        Stream viewing it, raises StateError. Harmless a second time."""
        ptr = self.__dict__.get("_cstream")
        self._release()
        if ptr and self.__dict__.get("_destroy", False):
            _destroy_fn(ptr)

    @property
    def _released(self):
        """True once this object, or the Stream or CudaStreamPool whose stream it views, was
        released."""
        return False

    @property
    def handle(self):
        """The cudaStream_t as an int (0 for the legacy default stream)."""
        return lib.crmm_stream_handle(self._cstream) or 0

    def __cuda_stream__(self):
        """The CUDA stream protocol: (version 0, handle)."""
        return (0, self.handle)

    def is_default(self):
        """Check if we are the default CUDA stream: the legacy default stream (handle 0 or
        cudaStreamLegacy), as RMM's; the per-thread default stream is not (RMM is built without
        CUDA_API_PER_THREAD_DEFAULT_STREAM). libcrmm's crmm_stream_is_default, which the copies
        use to decide whether to wait, counts the per-thread one too."""
        return (lib.crmm_stream_handle(self._cstream) or 0) in _LEGACY_DEFAULT_HANDLES

    def synchronize(self):
        """Synchronize the CUDA stream"""
        check(lib.crmm_stream_synchronize(self._cstream))

    def __eq__(self, other):
        if not isinstance(other, Stream):
            return False
        if self._released or other._released:  # no stream to compare: equal only to itself
            return self is other
        return self.handle == other.handle

    def __hash__(self):
        return hash(None if self._released else self.handle)

    def __repr__(self):
        if self._released:  # repr must not raise: it shows in tracebacks and logs
            return "<crmm Stream (released)>"
        handle = self.handle
        kind = " (default)" if handle in _LEGACY_DEFAULT_HANDLES else " (per-thread default)" if handle == 2 else ""
        return f"<crmm Stream 0x{handle:x}{kind}>"


class _ReleasedStream(Stream):
    """A Stream once released: its _cstream (a data descriptor, ahead of the instance's own
    attribute) raises StateError, so every use does; releasing it again does nothing."""

    @property
    def _cstream(self):
        raise StateError("this Stream was released; it cannot be used", "CRMM_ERROR_STATE")

    @property
    def _released(self):
        return True

    def __del__(self, _destroy_fn=None):
        pass


def as_stream(stream):
    """A stream argument as a Stream: a Stream, or any object with the CUDA stream protocol
    ``__cuda_stream__`` (wrapped in a view that keeps it alive). Raises TypeError for None,
    ints and other objects (wrap a CuPy/Numba/PyTorch stream or a handle with Stream(obj))."""
    if isinstance(stream, Stream):
        return stream
    if stream is None:
        raise TypeError("stream argument cannot be None (pass a Stream or an object with __cuda_stream__; DEFAULT_STREAM is the default stream)")
    if hasattr(stream, "__cuda_stream__"):
        return Stream(stream)
    raise TypeError(f"stream must be a Stream or have __cuda_stream__, not {type(stream).__name__} (wrap it: Stream(obj))")


def _view_of(handle):
    out = ctypes.c_void_p()
    check(lib.crmm_stream_view(handle, ctypes.byref(out)))
    return Stream._from_cstream(out.value, destroy=True)


# cudaStream_t 0, cudaStreamLegacy (1) and cudaStreamPerThread (2), as RMM's three.
DEFAULT_STREAM = Stream._from_cstream(lib.crmm_stream_default())
LEGACY_DEFAULT_STREAM = _view_of(1)
PER_THREAD_DEFAULT_STREAM = Stream._from_cstream(lib.crmm_stream_per_thread())
