"""The calls a DeviceBuffer makes on every allocation and free: create a crmm_device_buffer,
free it, and read its ptr, size and device.

A buffer is held by an owner object that frees it when it goes away, so that DeviceBuffer itself
needs no __del__; ctypes takes an owner wherever libcrmm wants the crmm_device_buffer * (its
``_as_parameter_``). Two implementations with one interface (``ops``):
  - the C extension crmm._fastalloc (Python's stable ABI), whose owner is a C object: a create
    and free cost about what two Python function calls cost;
  - ctypes, whose owner is CtypesBuffer below (several times slower), where the extension is
    not built.
Both call the libcrmm that crmm._lib loaded: the extension links no libcrmm, it is given the
addresses of these functions. Where the extension comes from:
  - $CRMM_FASTALLOC, the path of the built module (``make check`` points it at the build tree's),
    or ``off`` for ctypes only;
  - else the module installed beside this package (``crmm._fastalloc``), when there is one.

The interface:
  ops.create(size, cstream, mr) -> owner  (cstream, mr: ints or None; raises as _lib.check does)
  ops.create_zeroed(size, cstream, mr, cuda_stream, sync) -> owner
                                          (the memory filled with zeros on cuda_stream, the
                                          cudaStream_t of cstream; then cstream synchronized
                                          when sync: DeviceBuffer(size=n) in one call)
  ops.create_wrapped(size, cstream, mr, memory, pointer, owner_type, stream)
                                       -> pointer(memory(ptr, size, owner, device), 0)
                                          (owner: an owner_type (DeviceBuffer) made as its
                                          __new__ makes it, with _buf, _stream = stream and
                                          _mr = None; CuPy's UnownedMemory and MemoryPointer
                                          around it, in one call)
  ops.adopt(address) -> owner             (of a crmm_device_buffer * another libcrmm call made)
  owner.ptr(), owner.size(), owner.device() -> int
  owner.free()                            (free now; the accessors must not be called after it)
Each owner carries its implementation, so buffers made before a switch (`use`) keep working.
"""

import ctypes
import importlib.machinery
import importlib.util
import os

from . import _lib
from ._host import size_arg
from ._lib import check, lib

__all__ = ["ops", "CtypesBuffer", "CtypesOps", "extension", "use"]


class CtypesBuffer:
    """Owns one crmm_device_buffer (the ctypes implementation's owner)."""

    __slots__ = ("_as_parameter_",)

    def __init__(self, address):
        self._as_parameter_ = address

    @property
    def address(self):
        return self._as_parameter_

    def ptr(self, _ptr=lib.crmm_device_buffer_ptr):
        return _ptr(self._as_parameter_) or 0

    def size(self, _size=lib.crmm_device_buffer_size):
        return _size(self._as_parameter_)

    def device(self, _device=lib.crmm_device_buffer_device):
        return _device(self._as_parameter_)

    def free(self, _destroy=lib.crmm_device_buffer_destroy):
        buf, self._as_parameter_ = self._as_parameter_, 0
        if buf:
            _destroy(buf)

    __del__ = free


def memset_failed(err):
    """Raise CudaError for a cudaError_t of cudaMemsetAsync."""
    raise _lib.error_for(4, f"cudaMemsetAsync failed: {_lib.text(_lib.cuda_get_error_string(err))}")


def memset_zero(owner, size, cuda_stream, sync, cstream):
    """Fill a new buffer's `size` bytes with zeros on cuda_stream with its device current, then
    synchronize cstream when `sync` (through ctypes)."""
    if _lib.cuda_memset_async is None:
        raise _lib.error_for(8, "libcrmm's CUDA runtime has no cudaMemsetAsync")
    with _lib.device_context(owner.device()):
        err = _lib.cuda_memset_async(owner.ptr(), 0, size, cuda_stream)
        if err != 0:
            memset_failed(err)
    if sync:
        check(lib.crmm_stream_synchronize(cstream))


def _zeroed_through(create):
    """create_zeroed over a `create` and memset_zero (an exception drops the owner: freed)."""

    def create_zeroed(size, cstream, mr, cuda_stream, sync):
        owner = create(size, cstream, mr)
        if size:
            memset_zero(owner, size, cuda_stream, sync, cstream)
        return owner

    return create_zeroed


def _wrapped_through(create):
    """create_wrapped over a `create`: a DeviceBuffer-like owner handed to a foreign memory class."""

    def create_wrapped(size, cstream, mr, memory, pointer, owner_type, stream):
        owner = owner_type.__new__(owner_type)
        owner._buf = create(size_arg(size, "size"), cstream, mr)
        owner._stream = stream
        owner._mr = None
        return pointer(memory(owner._buf.ptr(), size, owner, owner._buf.device()), 0)

    return create_wrapped


class CtypesOps:
    """The calls through ctypes (used when the extension is not built)."""

    @staticmethod
    def create(size, cstream, mr, _create=lib.crmm_device_buffer_create, _check=check):
        out = ctypes.c_void_p()
        _check(_create(size, cstream, mr, ctypes.byref(out)))
        return CtypesBuffer(out.value)

    adopt = CtypesBuffer


CtypesOps.create_zeroed = staticmethod(_zeroed_through(CtypesOps.create))
CtypesOps.create_wrapped = staticmethod(_wrapped_through(CtypesOps.create))


def _address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


# The interface version of crmm._fastalloc this file is written for (the module's ABI constant).
EXTENSION_ABI = 7


def _load_extension():
    """crmm._fastalloc bound to libcrmm, or None where it is not built (or $CRMM_FASTALLOC=off).
    An installed module of another interface version is passed over (ctypes is used); a path
    in $CRMM_FASTALLOC that cannot be loaded, or names such a module, raises ImportError."""
    where = os.environ.get("CRMM_FASTALLOC", "")
    if where == "off":
        return None
    if where:
        try:
            loader = importlib.machinery.ExtensionFileLoader("crmm._fastalloc", where)
            spec = importlib.util.spec_from_file_location("crmm._fastalloc", where, loader=loader)
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
        except (ImportError, OSError) as e:
            raise ImportError(f"$CRMM_FASTALLOC={where} cannot be loaded: {e} (unset it, or set it to off)") from None
        if getattr(module, "ABI", None) != EXTENSION_ABI:
            raise ImportError(f"$CRMM_FASTALLOC={where} is a crmm._fastalloc of another version "
                              f"(ABI {getattr(module, 'ABI', None)}, this package needs {EXTENSION_ABI})")
    else:
        try:
            from . import _fastalloc as module
        except ImportError:
            return None
        if getattr(module, "ABI", None) != EXTENSION_ABI:
            return None
    module.bind(
        _address(lib.crmm_device_buffer_create),
        _address(lib.crmm_device_buffer_destroy),
        _address(lib.crmm_device_buffer_ptr),
        _address(lib.crmm_device_buffer_size),
        _address(lib.crmm_device_buffer_device),
        _lib.check,
    )
    if hasattr(lib, "crmm_device_buffer_try_create"):
        module.bind_nowait(
            _address(lib.crmm_device_buffer_try_create),
            _address(lib.crmm_device_buffer_try_destroy),
        )
    if _lib.cuda_memset_async is not None:
        module.bind_zero(
            _address(lib.crmm_cuda_device_enter),
            _address(lib.crmm_cuda_device_restore),
            _address(_lib.cuda_memset_async),
            _address(lib.crmm_stream_synchronize),
            memset_failed,
        )
    return module


class _ExtensionOps:
    """The extension's calls (its create_zeroed where libcrmm's CUDA runtime has
    cudaMemsetAsync; else create and memset_zero, which then raises)."""

    def __init__(self, module):
        self.create = module.create
        self.create_wrapped = module.create_wrapped
        self.adopt = module.adopt
        self.create_zeroed = module.create_zeroed if _lib.cuda_memset_async is not None \
            else _zeroed_through(module.create)


class _Ops:
    """The implementation in use: its functions are attributes, so that DeviceBuffer reaches
    them in one attribute lookup and `use` can switch them (the tests run both)."""

    __slots__ = ("name", "create", "create_zeroed", "create_wrapped", "adopt")

    def set(self, impl, name):
        self.name = name
        self.create = impl.create
        self.create_zeroed = impl.create_zeroed
        self.create_wrapped = impl.create_wrapped
        self.adopt = impl.adopt


extension = _load_extension()
_extension_ops = _ExtensionOps(extension) if extension is not None else None
ops = _Ops()
ops.set(_extension_ops or CtypesOps, "extension" if extension else "ctypes")


def use(name):
    """Make new DeviceBuffers through "extension" or "ctypes" (each buffer keeps the owner it was
    made with). Returns the name used before. Raises ValueError for
    another name or for "extension" where it is not built."""
    if name not in ("extension", "ctypes"):
        raise ValueError(f"use 'extension' or 'ctypes', not {name!r}")
    if name == "extension" and extension is None:
        raise ValueError("crmm._fastalloc is not built (or $CRMM_FASTALLOC is off)")
    before = ops.name
    ops.set(_extension_ops if name == "extension" else CtypesOps, name)
    return before
