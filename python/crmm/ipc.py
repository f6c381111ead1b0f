"""Share crmm device memory with another process (CUDA IPC; crmm/ipc.h).

Memory from ``async`` made with ``enable_ipc=true`` or from an expandable pool made with
``ipc=true`` can be exported; anything else raises UnsupportedError saying why.

    # exporting process
    mr = crmm.mr.MemoryResource("async", "enable_ipc=true")
    buf = crmm.DeviceBuffer(size=n, mr=mr)
    handle = crmm.ipc.export(buf)          # an IpcHandle: picklable
    queue.put(handle)                      # multiprocessing passes its file descriptors

    # importing process
    handle = queue.get()
    with handle.open() as shared:          # an ImportedBuffer: ptr, size, __cuda_array_interface__
        data = shared.tobytes()

An IpcHandle pickles the way PyTorch's and CuPy's shared CUDA tensors do across
``multiprocessing``: its bytes travel in the pickle and each file descriptor through
``multiprocessing.reduction.DupFd`` (duplicated into a child being started, or fetched from the
sending process over a UNIX socket). Such a pickle can be loaded once, while the sender lives.
``send(sock, handle)`` and ``recv(sock)`` pass a handle over a connected UNIX socket directly.

The exporter must keep the buffer alive while another process uses it; for ``async`` memory the
importer must close its ImportedBuffer before the exporter frees the buffer (the driver's rule),
while an expandable pool's pages stay until both sides let go.
"""

import ctypes
import os
import threading
from multiprocessing import reduction

from . import _lib
from ._lib import check, lib
from ._errors import InvalidArgumentError
from ._host import int_arg, pointer_arg, size_arg

_c_int_p = ctypes.POINTER(ctypes.c_int)
_PROTOTYPES = {
    "crmm_ipc_export": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]),
    "crmm_ipc_handle_free": (None, [ctypes.c_void_p]),
    "crmm_ipc_handle_bytes": (ctypes.c_size_t, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
    "crmm_ipc_handle_fds": (ctypes.c_size_t, [ctypes.c_void_p, ctypes.POINTER(_c_int_p)]),
    "crmm_ipc_handle_from": (
        ctypes.c_int,
        [ctypes.c_char_p, ctypes.c_size_t, _c_int_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)],
    ),
    "crmm_ipc_send": (ctypes.c_int, [ctypes.c_int, ctypes.c_void_p]),
    "crmm_ipc_recv": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]),
    "crmm_ipc_import": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
    "crmm_ipc_mapping_ptr": (ctypes.c_void_p, [ctypes.c_void_p]),
    "crmm_ipc_mapping_size": (ctypes.c_size_t, [ctypes.c_void_p]),
    "crmm_ipc_close": (ctypes.c_int, [ctypes.c_void_p]),
}
for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.restype, _fn.argtypes = _restype, _argtypes


_FD_END = 1 << 31  # C's int: a larger number given to C would be cut to another descriptor


def _fd_arg(fd, what="a file descriptor"):
    """A descriptor as C's int: anything with __index__ (TypeError otherwise), ValueError outside
    [0, 2**31), which C would read as another descriptor (2**32 + 4 as 4)."""
    fd = int_arg(fd, what)  # not bool: True would be descriptor 1
    if not 0 <= fd < _FD_END:
        raise ValueError(f"{what} {fd} is not a file descriptor")
    return fd


class IpcHandle:
    """An exported allocation: its bytes and the file descriptors it owns (closed with it)."""

    def __init__(self, data, fds=()):
        """A handle from bytes and descriptors received another way; it takes ownership of
        the descriptors (and closes them when `data` is not a crmm IPC handle:
        InvalidArgumentError)."""
        self._h = None
        self._lock = threading.Lock()  # close() against the calls that use the handle
        fds = list(fds)
        try:
            raw = bytes(memoryview(data))  # its bytes, whatever buffer holds them
            fds = [_fd_arg(fd) for fd in fds]
        except BaseException:
            for fd in fds:  # owned from the call on, also when it fails
                try:
                    os.close(_fd_arg(fd))
                except (TypeError, ValueError, OSError):
                    pass
            raise
        arr = (ctypes.c_int * max(len(fds), 1))(*fds)
        out = ctypes.c_void_p()
        check(lib.crmm_ipc_handle_from(raw, len(raw), arr, len(fds), ctypes.byref(out)))
        self._h = out.value

    @classmethod
    def _adopt(cls, h):
        self = cls.__new__(cls)
        self._h = h
        self._lock = threading.Lock()
        return self

    # no other reference is left when this runs: no lock needed
    def __del__(self, _free=lib.crmm_ipc_handle_free):
        h = getattr(self, "_h", None)
        if h:
            self._h = None
            _free(h)

    def _live(self):
        """The handle (call with self._lock held: close() cannot free it meanwhile)."""
        if not self._h:
            raise InvalidArgumentError("ipc: the handle is closed", "CRMM_ERROR_INVALID_ARGUMENT")
        return self._h

    @property
    def data(self):
        """The handle's bytes."""
        p = ctypes.c_void_p()
        with self._lock:
            n = lib.crmm_ipc_handle_bytes(self._live(), ctypes.byref(p))
            return ctypes.string_at(p.value, n) if n else b""

    @property
    def fds(self):
        """The handle's file descriptors (owned by the handle)."""
        p = _c_int_p()
        with self._lock:
            n = lib.crmm_ipc_handle_fds(self._live(), ctypes.byref(p))
            return [p[i] for i in range(n)]

    def close(self):
        """Close the descriptors now (the handle cannot be used afterwards). Safe to call twice,
        and from several threads: one of them frees the handle."""
        with self._lock:
            h, self._h = self._h, None
        if h:
            lib.crmm_ipc_handle_free(h)

    def open(self):
        """Map the memory in this process, on the current device: an ImportedBuffer."""
        out = ctypes.c_void_p()
        with self._lock:
            check(lib.crmm_ipc_import(self._live(), ctypes.byref(out)))
        return ImportedBuffer._adopt(out.value)

    def __reduce__(self):
        return (_rebuild, (self.data, [reduction.DupFd(fd) for fd in self.fds]))

    def __repr__(self):
        try:
            return "<crmm.ipc.IpcHandle %d bytes, %d descriptors>" % (len(self.data), len(self.fds))
        except InvalidArgumentError:
            return "<crmm.ipc.IpcHandle closed>"


def _rebuild(data, dupfds):
    """The handle pickled by IpcHandle.__reduce__, its descriptors received from the sender; those
    received before one that fails are closed, not left to nobody."""
    fds = []
    try:
        for d in dupfds:
            fds.append(d.detach())
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return IpcHandle(data, fds)


class ImportedBuffer:
    """Memory another process exported, mapped in this one. Close it (or leave a `with`
    block) before the exporter frees it when it comes from ``async``."""

    def __init__(self, mapping):
        """Only None (a closed buffer) is accepted here: a mapping comes from
        IpcHandle.open(), and any other value would be unmapped as a crmm_ipc_mapping *."""
        if mapping is not None:
            raise TypeError(
                f"mapping must be None (a closed buffer), not {type(mapping).__name__}: "
                "an ImportedBuffer comes from IpcHandle.open() or crmm.ipc.open_handle()"
            )
        self._m = None
        self._lock = threading.Lock()  # close() from two threads closes once

    @classmethod
    def _adopt(cls, mapping):
        """The buffer owning `mapping`, a crmm_ipc_mapping * from crmm_ipc_import."""
        self = cls.__new__(cls)
        self._m = mapping
        self._lock = threading.Lock()
        return self

    def _live(self):
        """The mapping (call with self._lock held: close() cannot unmap it meanwhile)."""
        if not self._m:
            raise InvalidArgumentError("ipc: the imported buffer is closed", "CRMM_ERROR_INVALID_ARGUMENT")
        return self._m

    @property
    def ptr(self):
        """The mapped address; InvalidArgumentError once closed."""
        with self._lock:
            return lib.crmm_ipc_mapping_ptr(self._live()) or 0

    @property
    def size(self):
        """The mapped bytes; InvalidArgumentError once closed."""
        with self._lock:
            return int(lib.crmm_ipc_mapping_size(self._live()))

    @property
    def nbytes(self):
        return self.size

    @property
    def __cuda_array_interface__(self):
        return {"data": (self.ptr, False), "shape": (self.size,), "strides": None, "typestr": "|u1", "version": 3}

    def tobytes(self):
        """The bytes, copied to the host (a close() meanwhile waits for the copy)."""
        with self._lock:
            m = self._live()
            size = int(lib.crmm_ipc_mapping_size(m))
            out = ctypes.create_string_buffer(size)
            stream = lib.crmm_stream_default()
            check(lib.crmm_copy_ptr_to_host(lib.crmm_ipc_mapping_ptr(m), out, size, stream))
            check(lib.crmm_stream_synchronize(stream))
        return out.raw

    def close(self):
        """Unmap the memory (no work may still use it). Safe to call twice, and from several
        threads: one of them unmaps it."""
        with self._lock:
            m, self._m = self._m, None
        if m:
            check(lib.crmm_ipc_close(m))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __copy__(self):
        raise TypeError(
            "cannot copy an ImportedBuffer: it owns its mapping (share the object, or open its IpcHandle again)"
        )

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __reduce_ex__(self, protocol):
        raise TypeError("cannot pickle an ImportedBuffer: its mapping is valid only in this process (send its IpcHandle)")

    def __reduce__(self):
        return self.__reduce_ex__(2)

    def __del__(self, _close=lib.crmm_ipc_close):  # bound: at exit this may run after `lib` is gone
        m = getattr(self, "_m", None)
        if m:
            self._m = None
            _close(m)

    def __repr__(self):
        try:
            return "<crmm.ipc.ImportedBuffer ptr=%#x size=%d>" % (self.ptr, self.size)
        except InvalidArgumentError:
            return "<crmm.ipc.ImportedBuffer closed>"


def export_pointer(mr, ptr, size):
    """Export [ptr, ptr + size) of memory allocated from `mr` (a crmm.mr.MemoryResource).
    Raises TypeError, ValueError or OverflowError for a bad pointer or size, StateError for a
    released resource, and what crmm_ipc_export refuses."""
    from .pylibrmm.memory_resource import MemoryResource

    if not isinstance(mr, MemoryResource):
        raise TypeError(f"mr must be a crmm.mr.MemoryResource, not {type(mr).__name__}")
    ptr, size = pointer_arg(ptr, "ptr"), size_arg(size, "size")
    handle = mr._handle  # before any C call: a released resource is not NULL's default
    out = ctypes.c_void_p()
    check(lib.crmm_ipc_export(handle, ptr, size, ctypes.byref(out)))
    return IpcHandle._adopt(out.value)


def export(buf):
    """Export a DeviceBuffer's memory (from the resource it was allocated from)."""
    from .pylibrmm.device_buffer import DeviceBuffer

    if not isinstance(buf, DeviceBuffer):
        raise TypeError(f"buf must be a DeviceBuffer, not {type(buf).__name__}")
    return export_pointer(buf.mr, buf.ptr, buf.size)


def open_handle(handle):
    """Map an IpcHandle (``handle.open()``)."""
    return _handle_arg(handle).open()


def _handle_arg(handle):
    if not isinstance(handle, IpcHandle):
        raise TypeError(f"handle must be a crmm.ipc.IpcHandle, not {type(handle).__name__}")
    return handle


def _sock_fd(sock):
    """A socket's descriptor: an int descriptor, or an object with fileno(); TypeError else."""
    if isinstance(sock, bool) or not (isinstance(sock, int) or hasattr(sock, "fileno")):
        raise TypeError(f"sock must be a socket or a file descriptor, not {type(sock).__name__}")
    return _fd_arg(sock if isinstance(sock, int) else sock.fileno(), "sock")


def send(sock, handle):
    """Send a handle over a connected UNIX stream socket (a socket object or a descriptor)."""
    fd = _sock_fd(sock)
    handle = _handle_arg(handle)
    with handle._lock:  # a close() meanwhile waits: the socket reads the handle's bytes and descriptors
        check(lib.crmm_ipc_send(fd, handle._live()))


def recv(sock):
    """Receive a handle `send` sent."""
    fd = _sock_fd(sock)
    out = ctypes.c_void_p()
    check(lib.crmm_ipc_recv(fd, ctypes.byref(out)))
    return IpcHandle._adopt(out.value)


__all__ = ["ImportedBuffer", "IpcHandle", "export", "export_pointer", "open_handle", "recv", "send"]
