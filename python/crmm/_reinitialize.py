"""rmm.reinitialize and its hooks: replace each listed device's resource with a new chain built
from RMM's options (cuda or managed memory, optionally under a pool, optionally logged).

Hooks run before the new resources are built, last registered first, so a library can drop
what it holds from the old resources (caches of device buffers, say) first.
"""

import os
import stat

from ._host import path_arg, size_param
from .pylibrmm import memory_resource as _mr

__all__ = ["reinitialize", "register_reinitialize_hook", "unregister_reinitialize_hook"]

_hooks = []


def register_reinitialize_hook(func, *args, **kwargs):
    """Call ``func(*args, **kwargs)`` at the start of every reinitialize() (hooks run in the
    reverse order of registration). Returns `func`, so it can be used as a decorator. Raises
    TypeError when `func` is not callable."""
    if not callable(func):
        raise TypeError(f"a reinitialize hook must be callable, not {type(func).__name__}")
    _hooks.append((func, args, kwargs))
    return func


def unregister_reinitialize_hook(func):
    """Remove every registration of `func` (nothing when it was not registered)."""
    _hooks[:] = [hook for hook in _hooks if hook[0] != func]


def _devices_arg(devices):
    if devices is None:  # RMM's _initialize takes None as device 0
        return [0]
    if isinstance(devices, bool):
        raise TypeError("devices must be an int or a list of ints, not bool")
    if isinstance(devices, int):
        devices = [devices]
    try:
        listed = [_mr._device_arg(d) for d in devices]
    except TypeError:
        raise TypeError(f"devices must be an int or a list of ints, not {devices!r}") from None
    for d in listed:
        if d < 0:
            raise ValueError(f"device {d} is not a device ordinal")
    return listed


def _log_file_for(log_file_name, device):
    """RMM's per-device log name: ".dev<N>" before the extension, made absolute ("log.csv" ->
    "/cwd/log.dev0.csv"). A name that is already a device file or a FIFO (/dev/null) is kept as
    it is, so that a log sent there is not written beside it; a directory's name gets the suffix,
    as in RMM ("logs" -> "/cwd/logs.dev0")."""
    name = os.fspath(log_file_name)
    try:
        mode = os.stat(name).st_mode
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            return name
    except OSError:
        pass  # no such file yet
    root, ext = os.path.splitext(name)
    return os.path.abspath(f"{root}.dev{device}{ext}")


def reinitialize(
    pool_allocator=False,
    managed_memory=False,
    initial_pool_size=None,
    maximum_pool_size=None,
    devices=0,
    logging=False,
    log_file_name=None,
):
    """Run the reinitialize hooks, then give each of `devices` (an int or a list; None is device
    0, as in RMM) a new resource; as in RMM, an empty list gives none a new one (the hooks still
    run) and a device not listed keeps its resource:
    cudaMalloc (or cudaMallocManaged with `managed_memory`), under a pool of
    `initial_pool_size`/`maximum_pool_size` (ints or size strings; pool defaults when None) with
    `pool_allocator` (without it they are ignored, not checked, as in RMM), logged to
    `log_file_name` with ".dev<N>" before its extension with `logging` (default file:
    $RMM_LOG_FILE, then $CRMM_LOG_FILE). Memory from the old resources
    must not be used afterwards (as in RMM). Logging again to the file a device's present logging
    layer writes shares that file (one writer per file in a process); a file another process
    writes is refused (CrmmIOError, an OSError), and the device keeps its new chain without
    logging. With no visible device (CUDA_VISIBLE_DEVICES="") it warns and changes nothing, as
    RMM does.

    Raises TypeError or ValueError for bad arguments (before any hook runs), ValueError when
    logging has no file name, CudaError for another CUDA failure (no driver, say),
    InvalidArgumentError for a device that does not exist, and the plugins' errors."""
    device_list = _devices_arg(devices)
    pool_sizes = (None, None)  # ignored without a pool, as in RMM, which then does not read them
    if pool_allocator:
        pool_sizes = (size_param(initial_pool_size, "initial_pool_size"), size_param(maximum_pool_size, "maximum_pool_size"))
        _mr.check_pool_sizes(*pool_sizes)
    if logging:
        if log_file_name is None:
            log_file_name = os.environ.get("RMM_LOG_FILE") or os.environ.get("CRMM_LOG_FILE")
        if not log_file_name:
            raise ValueError("reinitialize(logging=True) needs a log_file_name (or $RMM_LOG_FILE)")
        path_arg(log_file_name, "log_file_name")
    for func, args, kwargs in reversed(list(_hooks)):
        func(*args, **kwargs)
    _mr._initialize(
        pool_allocator=pool_allocator,
        managed_memory=managed_memory,
        initial_pool_size=pool_sizes[0],
        maximum_pool_size=pool_sizes[1],
        devices=device_list,
        logging=logging,
        log_file_name=log_file_name,
    )
