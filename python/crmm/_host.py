"""Host buffers as (address, length) for libcrmm's copies, and device pointers as ints."""

import numpy as np


def host_view(obj, writable=False, name="host buffer"):
    """A contiguous uint8 numpy view of any object with the buffer protocol (bytes,
    bytearray, memoryview, numpy array, ...); refused: strided or, when `writable`, read-only
    memory. Keep the view alive while libcrmm uses its address (``view.ctypes.data``)."""
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(f"{name} must support the buffer protocol, not {type(obj).__name__}") from None
    if not mv.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    if writable and mv.readonly:
        raise ValueError(f"{name} must be writable ({type(obj).__name__} is read-only)")
    if mv.nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv, dtype=np.uint8)


def address(view):
    """The address of a host_view (None for an empty one)."""
    return view.ctypes.data if view.size else None


def pointer_arg(value, name):
    """A device pointer given as an int (uintptr_t, as RMM takes it)."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(value)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be an int address, not {type(value).__name__}") from None
    if not 0 <= value < 1 << 64:
        raise OverflowError(f"{name} {value} is not an address")
    return value


def size_arg(value, name):
    """A byte count (size_t)."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(value.__index__())
        except AttributeError:
            raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    if value < 0:
        raise ValueError(f"{name} must not be negative (got {value})")
    if value >= 1 << 64:
        raise OverflowError(f"{name} {value} does not fit in size_t")
    return value
