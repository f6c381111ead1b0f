"""Logging: RMM's library log (level, flush level) and allocation-log switch over libcrmm.

crmm's library log goes to stderr, or to $CRMM_DEBUG_LOG_FILE. enable_logging() wraps each
device's current resource that does not log already in a LoggingResourceAdaptor, which writes
each allocation and free as a CSV line in RMM's format, one file per device.
"""

import contextlib
import ctypes
import os
import threading
from enum import IntEnum

from .. import _lib
from .._host import path_arg
from .._lib import check, lib

__all__ = [
    "level_enum",
    "set_logging_level",
    "get_logging_level",
    "should_log",
    "flush_logger",
    "set_flush_level",
    "get_flush_level",
    "enable_logging",
    "disable_logging",
    "get_log_filenames",
]


class level_enum(IntEnum):
    """Log levels, lowest first (crmm_log_level)."""

    trace = 0
    debug = 1
    info = 2
    warn = 3
    error = 4
    critical = 5
    off = 6
    n_levels = 7  # RMM's (rapids_logger's) count of the levels above: as a level, off


def _level_arg(level):
    """A level argument: a level_enum only (plain ints are refused, as RMM refuses them)."""
    if not isinstance(level, level_enum):
        raise TypeError(f"level must be an instance of the level_enum enum, not {type(level).__name__}")
    return level


# n_levels, the last of RMM's levels, is their count: as the log or flush level it passes nothing,
# as off does, and reads back as n_levels (RMM's test of the levels sets and reads back each
# member). libcrmm knows the levels up to off: it holds off while these remember n_levels.
_beyond_off = {"level": False, "flush": False}


def _c_level(level, which):
    level = _level_arg(level)
    _beyond_off[which] = level is level_enum.n_levels
    return int(level_enum.off if level is level_enum.n_levels else level)


def _read_level(c_level, which):
    level = level_enum(c_level)
    return level_enum.n_levels if level is level_enum.off and _beyond_off[which] else level


def set_logging_level(level):
    """Log messages of `level` and above (default warn, or $CRMM_LOG_LEVEL); n_levels, as off,
    logs nothing."""
    check(lib.crmm_log_set_level(_c_level(level, "level")))


def get_logging_level():
    """The current log level."""
    return _read_level(lib.crmm_log_get_level(), "level")


def should_log(level):
    """True when a message of `level` would be logged."""
    return bool(lib.crmm_log_should_log(int(_level_arg(level))))


def flush_logger():
    """Write out buffered log messages."""
    lib.crmm_log_flush()


def set_flush_level(level):
    """Flush the log at once after every message of `level` and above (n_levels, as off: none)."""
    check(lib.crmm_log_flush_on(_c_level(level, "flush")))


def get_flush_level():
    """The level from which messages are flushed at once."""
    return _read_level(lib.crmm_log_get_flush_level(), "flush")


# enable_logging and disable_logging look at each device's resource and then replace it: one
# call at a time, so that two threads enabling at once do not both wrap a device.
_switch_lock = threading.Lock()


def _on_device(device):
    """Make `device` current for a block; nothing when it is current already (a host config's
    device 0 without a GPU, which CUDA cannot be asked to make current)."""
    from .memory_resource import current_device

    return contextlib.nullcontext() if device == current_device() else _lib.device_context(device)


def enable_logging(log_file_name=None):
    """Log every allocation and free of each device's resource to a CSV file, as RMM: a device
    whose resource is a LoggingResourceAdaptor already (this function's, one set from Python or
    by reinitialize(logging=True)) is left as it is, so a second call changes nothing; every
    other device's resource becomes a LoggingResourceAdaptor over it, writing `log_file_name`
    with ``.dev<N>`` before its extension, made absolute (default: $RMM_LOG_FILE, as RMM's, then
    $CRMM_LOG_FILE). The devices, as RMM's: those whose resource was set or read from Python,
    or device 0 when there is none; a device the program never used is not touched (no context
    made, no resource created on it). Every adaptor is made before any is set, so a file that
    cannot be opened changes nothing. Raises ValueError when no name is given (nor $RMM_LOG_FILE, $CRMM_LOG_FILE) or the
    name holds a NUL byte, CrmmIOError when a file cannot be opened, CudaError without a
    device."""
    from .memory_resource import (
        LoggingResourceAdaptor,
        _recorded_devices,
        get_per_device_resource,
        set_per_device_resource,
    )

    if log_file_name is None:
        log_file_name = os.environ.get("RMM_LOG_FILE") or os.environ.get("CRMM_LOG_FILE")
        if not log_file_name:
            raise ValueError("enable_logging needs a log_file_name (or $RMM_LOG_FILE or $CRMM_LOG_FILE)")
    path_arg(log_file_name, "log_file_name")  # a NUL byte is refused before anything is looked at
    _lib.ensure_initialized()
    with _switch_lock:
        devices = sorted(_recorded_devices()) or [0]
        adaptors = []
        for device in devices:
            with _on_device(device):  # the adaptor's device and its file's .dev<N>
                mr = get_per_device_resource(device)
                if not isinstance(mr, LoggingResourceAdaptor):
                    adaptors.append((device, LoggingResourceAdaptor(mr, log_file_name=log_file_name)))
        for device, adaptor in adaptors:
            set_per_device_resource(device, adaptor)


def disable_logging():
    """Stop logging (the files are flushed and closed once nothing else holds them), as RMM: put
    back the upstream of every device whose resource is a LoggingResourceAdaptor
    (enable_logging's, reinitialize(logging=True)'s, or one set from Python), and undo libcrmm's
    switch (crmm_enable_logging). Nothing when logging is off."""
    from .memory_resource import LoggingResourceAdaptor, _current_objects, set_per_device_resource

    with _switch_lock:
        check(lib.crmm_disable_logging())
        for device, mr in _current_objects().items():
            if isinstance(mr, LoggingResourceAdaptor) and mr._upstream_or_none() is not None:
                set_per_device_resource(device, mr.upstream_mr)


def _switch_filenames():
    """{device: file name} of enable_logging's adaptors."""
    count = ctypes.c_int(0)
    check(lib.crmm_get_log_filenames(None, 0, ctypes.byref(count)))
    if count.value == 0:
        return {}
    names = (ctypes.c_char_p * count.value)()
    check(lib.crmm_get_log_filenames(names, count.value, ctypes.byref(count)))
    return {d: os.fsdecode(n) for d, n in enumerate(names[: count.value]) if n}


def get_log_filenames():
    """``{device: file name or None}``, as RMM's: an entry for every device whose resource was
    set from Python or read (get_current_device_resource, get_per_device_resource), the devices
    RMM records a resource for, and for every device the C switch (crmm_enable_logging) wraps;
    the file of the device's resource when that resource is a LoggingResourceAdaptor, else None
    (a logging layer further down the chain is not looked for, as in RMM). {} while no device is
    recorded."""
    from .memory_resource import LoggingResourceAdaptor, _recorded_devices, _resource_now

    names = {}
    for device in dict.fromkeys(_recorded_devices() + list(_switch_filenames())):
        mr = _resource_now(device)  # C's resource: the switch may have replaced the one recorded
        if mr is not None:
            names[device] = mr.get_file_name() if isinstance(mr, LoggingResourceAdaptor) else None
    return names
