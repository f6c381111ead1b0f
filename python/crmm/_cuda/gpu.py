"""rmm._cuda.gpu: the current device, device count and attributes, and CUDA versions, through
the CUDA runtime libcrmm itself is linked against (so they share one view of the current
device). A failed CUDA call raises CUDARuntimeError carrying CUDA's status and its
"name: description"; an argument of the wrong type raises TypeError before any CUDA call.

deviceGetName reads the name from cudaGetDeviceProperties rather than the driver API; a
failure there raises CUDADriverError (the type RMM documents for it) with the runtime's status.
getDeviceProperties returns cuda-python's cudaDeviceProp, as RMM's does, and so needs
cuda-python (cuda.bindings); the rest needs nothing beyond libcrmm.
"""

import ctypes

from .. import _lib
from .._host import int_arg

__all__ = [
    "CUDADriverError",
    "CUDARuntimeError",
    "deviceGetName",
    "driverGetVersion",
    "getDevice",
    "getDeviceAttribute",
    "getDeviceCount",
    "getDeviceProperties",
    "runtimeGetVersion",
    "setDevice",
]

# cudaErrorNotSupported: reported when the runtime libcrmm uses lacks a function.
_NOT_SUPPORTED = 801
# cudaDeviceProp begins with `char name[256]`; the buffer is larger than the whole struct of
# any CUDA release, so the runtime never writes past it.
_NAME_LENGTH = 256
_PROPERTIES_BUFFER = 16384

_c_int_p = ctypes.POINTER(ctypes.c_int)
_error_name = _lib._cuda_function("cudaGetErrorName", ctypes.c_char_p, [ctypes.c_int])
_get_device = _lib._cuda_function("cudaGetDevice", ctypes.c_int, [_c_int_p])
_set_device = _lib._cuda_function("cudaSetDevice", ctypes.c_int, [ctypes.c_int])
_get_device_count = _lib._cuda_function("cudaGetDeviceCount", ctypes.c_int, [_c_int_p])
_driver_get_version = _lib._cuda_function("cudaDriverGetVersion", ctypes.c_int, [_c_int_p])
_device_get_attribute = _lib._cuda_function(
    "cudaDeviceGetAttribute", ctypes.c_int, [_c_int_p, ctypes.c_int, ctypes.c_int]
)
_get_device_properties = _lib._cuda_function(
    "cudaGetDeviceProperties_v2", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]
) or _lib._cuda_function("cudaGetDeviceProperties", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int])


def _describe(status):
    """CUDA's "cudaErrorX: description" of a cudaError_t value."""
    name = _lib.text(_error_name(status)) if _error_name is not None else ""
    text = _lib.text(_lib.cuda_get_error_string(status)) if _lib.cuda_get_error_string is not None else ""
    return f"{name or f'cudaError {status}'}: {text or 'unknown error'}"


class _CUDAStatusError(RuntimeError):
    """A CUDA failure carrying CUDA's status: ``status`` is its cudaError_t value (an int),
    ``str()`` is "cudaErrorName: description"."""

    def __init__(self, status):
        self.status = int(status)
        super().__init__(_describe(self.status))

    def __reduce__(self):
        return (type(self), (self.status,))


class CUDARuntimeError(_CUDAStatusError):
    """A CUDA runtime call failed: ``status`` is its cudaError_t value (an int), ``str()`` is
    "cudaErrorName: description"."""


class CUDADriverError(_CUDAStatusError):
    """The device name could not be read: ``status`` is CUDA's error value, ``str()`` is
    "cudaErrorName: description"."""


def _integer(value, what):
    """`value` as a C int (anything with __index__, not bool); TypeError otherwise, OverflowError
    outside C's int (which ctypes would cut to another value: device 2**32 to device 0)."""
    value = int_arg(value, what)
    if not -(1 << 31) <= value < 1 << 31:
        raise OverflowError(f"{what} {value} does not fit in a C int")
    return value


def _call(fn, *args, error=CUDARuntimeError):
    """Call a runtime function, raising `error` for a status other than cudaSuccess."""
    if fn is None:
        raise error(_NOT_SUPPORTED)
    status = fn(*args)
    if status != 0:
        raise error(status)


def _int_out(fn, *args):
    value = ctypes.c_int(0)
    _call(fn, ctypes.byref(value), *args)
    return value.value


def getDevice():
    """The calling thread's current CUDA device. Raises CUDARuntimeError (no device, no driver)."""
    return _int_out(_get_device)


def setDevice(device):
    """Make `device` the calling thread's current CUDA device. Raises TypeError for a non-int,
    CUDARuntimeError for a device that does not exist (or none at all)."""
    _call(_set_device, _integer(device, "device"))


def getDeviceCount():
    """Number of CUDA devices. Raises CUDARuntimeError when there is none or no driver."""
    return _int_out(_get_device_count)


def driverGetVersion():
    """Newest CUDA version the driver supports, as 1000 * major + 10 * minor (0 without a
    driver). Raises CUDARuntimeError on failure."""
    return _int_out(_driver_get_version)


def runtimeGetVersion():
    """Version of the CUDA runtime libcrmm is linked against, as 1000 * major + 10 * minor
    (needs no device). Raises CUDARuntimeError on failure."""
    return _int_out(_lib.cuda_runtime_get_version)


def getDeviceAttribute(attr, device):
    """Value of the cudaDeviceAttr `attr` (a cuda-python enum member or its int value) of
    `device`. Raises TypeError for an attr or device of another type, CUDARuntimeError for
    an unknown attribute or device (or no device at all)."""
    attr = _integer(getattr(attr, "value", attr), "attr")
    return _int_out(_device_get_attribute, attr, _integer(device, "device"))


def deviceGetName(device):
    """Name of `device` (e.g. "NVIDIA H200"). Raises TypeError for a non-int, CUDADriverError
    for a device that does not exist (or none at all)."""
    device = _integer(device, "device")
    properties = ctypes.create_string_buffer(_PROPERTIES_BUFFER)
    _call(_get_device_properties, properties, device, error=CUDADriverError)
    return properties.raw[:_NAME_LENGTH].split(b"\0", 1)[0].decode("utf-8", "replace")


def getDeviceProperties(device):
    """cuda-python's cudaDeviceProp of `device` (``.name``, ``.totalGlobalMem``, ``.major``, ...),
    as RMM returns it. Raises TypeError for a non-int, ModuleNotFoundError when cuda-python
    (cuda.bindings) is not installed, CUDARuntimeError for a device that does not exist (or none
    at all)."""
    device = _integer(device, "device")
    try:
        from cuda.bindings import runtime
    except ImportError as e:
        raise ModuleNotFoundError(
            "rmm._cuda.gpu.getDeviceProperties returns cuda-python's cudaDeviceProp: install "
            "cuda-python (cuda-bindings), or read single properties with getDeviceAttribute",
            name="cuda.bindings",
        ) from e
    status, prop = runtime.cudaGetDeviceProperties(device)
    if int(status) != 0:
        raise CUDARuntimeError(int(status))
    return prop
