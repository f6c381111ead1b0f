"""Arguments checked before they reach libcrmm: host buffers as (address, length), device
pointers and byte counts as ints that fit in 64 bits, sizes as RMM writes them ("1.5GiB"), and
text without NUL bytes (C would cut it short there)."""

import ctypes
import os

import numpy as np


def host_view(obj, writable=False, name="host buffer"):
    """A uint8 numpy view of a 1-D contiguous buffer of unsigned bytes (bytes, bytearray, a
    uint8 numpy array, a memoryview of format "B"), as RMM's functions take them. Raises
    TypeError for objects without the buffer protocol, ValueError for other element types, more
    than one dimension, strided or, when `writable`, read-only memory. Keep the view alive
    while libcrmm uses its address (``view.ctypes.data``)."""
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(f"{name} must support the buffer protocol, not {type(obj).__name__}") from None
    if mv.ndim != 1:
        raise ValueError(f"{name} must have 1 dimension, not {mv.ndim}")
    if mv.format.lstrip("@=<>!|") != "B":
        raise ValueError(f"{name} must hold unsigned bytes (format 'B', numpy uint8), not format {mv.format!r}")
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


def int_arg(value, name, what="an int"):
    """An integer given as an int or any object with __index__ (a NumPy integer, as C's integer
    parameters take it in RMM). Raises TypeError for other types, bool and float included."""
    if isinstance(value, bool) or not isinstance(value, int):
        index = getattr(type(value), "__index__", None)
        if index is None or isinstance(value, bool):
            raise TypeError(f"{name} must be {what}, not {type(value).__name__}")
        value = index(value)
    return value


def pointer_arg(value, name):
    """A device pointer given as an int (uintptr_t, as RMM takes it), or any object with
    __index__. Raises TypeError for other types (bool and float too) and OverflowError outside
    [0, 2**64)."""
    value = int_arg(value, name, "an int address")
    if not 0 <= value < 1 << 64:
        raise OverflowError(f"{name} {value} is not an address")
    return value


def bool_arg(value, name):
    """A switch: True or False only (TypeError for anything else, 1 and "false" included: a
    string that reads as false would be taken as true)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


def size_arg(value, name):
    """A byte count (size_t)."""
    value = int_arg(value, name)
    if value < 0:
        raise ValueError(f"{name} must not be negative (got {value})")
    if value >= 1 << 64:
        raise OverflowError(f"{name} {value} does not fit in size_t")
    return value


def text_arg(value, name):
    """A str given to C as UTF-8 bytes. Raises TypeError for anything but a str and ValueError
    for a NUL byte (C would read the text only up to it)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"{name} must not contain a NUL byte: {value!r}")
    return value.encode()


def path_arg(value, name):
    """A file name (str, bytes or os.PathLike) as the bytes C opens. Raises TypeError for other
    types and ValueError for a NUL byte."""
    try:
        raw = os.fsencode(value)
    except TypeError:
        raise TypeError(f"{name} must be a path (str, bytes or os.PathLike), not {type(value).__name__}") from None
    if b"\0" in raw:
        raise ValueError(f"{name} must not contain a NUL byte: {value!r}")
    return raw


def parse_bytes(text):
    """The byte count of a size string as RMM and crmm write them: "4096", "64KiB", "1.5GiB",
    "10MB" (KiB = 1024, KB = 1000; units case-insensitive); a fraction of a larger unit is rounded
    down to a byte, exactly. Raises TypeError for anything but a str and InvalidArgumentError (a
    ValueError) for junk, negative sizes, a byte count with a nonzero fraction and sizes past 64
    bits."""
    from ._lib import check, lib

    raw = text_arg(text, "size")
    out = ctypes.c_uint64()
    check(lib.crmm_parse_size(raw, 0, ctypes.byref(out), None))
    return out.value


def size_param(value, name):
    """A size parameter of a resource: None (the plugin's default), a byte count, a size string
    ("1.5GiB"), or a percentage of the device's memory ("50%", resolved by the plugin). Returns
    the int or the checked string. Raises TypeError, ValueError or OverflowError as size_arg,
    and InvalidArgumentError (a ValueError) for a string that is not a size."""
    if value is None:
        return None
    if isinstance(value, str):
        from ._lib import check, lib

        raw = text_arg(value, name)
        out, percent = ctypes.c_uint64(), ctypes.c_double()
        try:
            check(lib.crmm_parse_size(raw, 0, ctypes.byref(out), ctypes.byref(percent)))
        except ValueError as e:
            raise type(e)(f"{name}: Could not parse {value!r} as a byte specification: {e}", e.status) from None
        return value.strip() if percent.value else out.value
    return size_arg(value, name)
