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


class CtypesOps:
    """The calls through ctypes (used when the extension is not built)."""

    @staticmethod
    def create(size, cstream, mr, _create=lib.crmm_device_buffer_create, _check=check):
        out = ctypes.c_void_p()
        _check(_create(size, cstream, mr, ctypes.byref(out)))
        return CtypesBuffer(out.value)

    adopt = CtypesBuffer


def _address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


# The interface version of crmm._fastalloc this file is written for (the module's ABI constant).
EXTENSION_ABI = 1


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
    return module


class _Ops:
    """The implementation in use: its functions are attributes, so that DeviceBuffer reaches
    them in one attribute lookup and `use` can switch them (the tests run both)."""

    __slots__ = ("name", "create", "adopt")

    def set(self, impl, name):
        self.name = name
        self.create = impl.create
        self.adopt = impl.adopt


extension = _load_extension()
ops = _Ops()
ops.set(extension or CtypesOps, "extension" if extension else "ctypes")


def use(name):
    """Make new DeviceBuffers through "extension" or "ctypes" (each buffer keeps the owner it was
    made with). Returns the name used before. Raises ValueError for
    another name or for "extension" where it is not built."""
    if name not in ("extension", "ctypes"):
        raise ValueError(f"use 'extension' or 'ctypes', not {name!r}")
    if name == "extension" and extension is None:
        raise ValueError("crmm._fastalloc is not built (or $CRMM_FASTALLOC is off)")
    before = ops.name
    ops.set(extension if name == "extension" else CtypesOps, name)
    return before
