"""A pool of CUDA streams: rmm.pylibrmm.cuda_stream_pool over libcrmm's crmm_stream_pool."""

import ctypes
import weakref

from .._errors import StateError
from .._handles import HandleOwner
from .._host import int_arg
from .._lib import check, lib
from .stream import CudaStreamFlags, Stream, _flags_arg

__all__ = ["CudaStreamPool"]


class CudaStreamPool(HandleOwner):
    """A pool of CUDA streams for efficient stream management.

    Provides thread-safe access to a collection of CUDA stream objects. Successive calls may
    return views of identical streams.

    Parameters
    ----------
    pool_size : int, optional
        Number of streams in the pool. Defaults to 16.
    flags : CudaStreamFlags, optional
        Flags used to create each stream. Defaults to CudaStreamFlags.SYNC_DEFAULT.

    The pool owns its streams: copy.copy, copy.deepcopy and pickling raise TypeError (share the
    object instead). Released by hand (``__del__``), it destroys them: the pool and the Streams it
    handed out raise StateError when used.
    """

    def __init__(self, pool_size=16, flags=CudaStreamFlags.SYNC_DEFAULT):
        if getattr(self, "_pool", None):  # made already: re-making it would leak its streams
            raise StateError("this CudaStreamPool is already made; __init__ cannot make it again", "CRMM_ERROR_STATE")
        self._pool = None
        pool_size = int_arg(pool_size, "pool_size")
        if pool_size <= 0 or pool_size >= 1 << 63:
            raise ValueError(f"pool_size must be a positive number of streams, not {pool_size}")
        flags = _flags_arg(flags)
        out = ctypes.c_void_p()
        check(lib.crmm_stream_pool_create(pool_size, int(flags), ctypes.byref(out)))
        self._pool = out.value

    def __copy__(self):
        raise TypeError("cannot copy a CudaStreamPool: it owns its streams (share the object)")

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __del__(self, _destroy_fn=lib.crmm_stream_pool_destroy):
        """Release the pool: destroy its streams; the Streams it handed out are released with
        them (their use raises StateError). Harmless a second time."""
        pool = getattr(self, "_pool", None)
        self._pool = None
        for stream in list(self.__dict__.pop("_handed_out", None) or ()):
            stream._release()
        if pool:
            _destroy_fn(pool)

    @property
    def _released(self):
        """True once the pool was released (its __del__ called by hand)."""
        return not getattr(self, "_pool", None)

    @property
    def _handle(self):
        """The crmm_stream_pool *, or StateError once released."""
        if self._released:
            raise StateError("this CudaStreamPool was released; it cannot be used", "CRMM_ERROR_STATE")
        return self._pool

    def get_pool_size(self):
        """Get the pool size.

        Returns
        -------
        int
            The number of streams in the pool
        """
        return int(lib.crmm_stream_pool_get_pool_size(self._handle))

    def get_stream(self, stream_id=None):
        """Get a Stream from the pool (optionally by ID).

        Parameters
        ----------
        stream_id : Optional[int], optional
            The ID of the stream to get (taken modulo the pool size; negative ids count from
            the end). If None, the next stream from the pool is returned (round-robin).

        Returns
        -------
        Stream
            A non-owning Stream object from the pool (it keeps the pool alive)
        """
        out = ctypes.c_void_p()
        if stream_id is None:
            check(lib.crmm_stream_pool_get_stream(self._handle, ctypes.byref(out)))
        else:
            stream_id = int_arg(stream_id, "stream_id", "an int or None")
            if not -(1 << 63) <= stream_id < 1 << 63:
                raise OverflowError(f"stream_id {stream_id} does not fit in 64 bits")
            check(lib.crmm_stream_pool_get_stream_by_id(self._handle, stream_id, ctypes.byref(out)))
        stream = Stream._from_cstream(out.value, owner=self)
        handed_out = self.__dict__.get("_handed_out")
        if handed_out is None:
            handed_out = self._handed_out = weakref.WeakSet()
        handed_out.add(stream)
        return stream
