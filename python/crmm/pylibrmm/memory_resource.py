"""Memory resources: rmm.mr over libcrmm's plugins, the config and the per-device registry.

A MemoryResource holds one reference to a crmm_resource. Build one from a plugin name and its
parameters (``MemoryResource("pool", {"initial_size": "1GiB"}, upstream=MemoryResource("cuda"))``),
from a resource of the loaded config (``MemoryResource.from_config("main")``), or with RMM's class
names below (CudaMemoryResource, PoolMemoryResource, ...). The current device's resource comes
from the config until set_current_device_resource replaces it, as in C.
"""

import ctypes
import os

from .. import _lib
from .._handles import HandleOwner
from .._host import pointer_arg, size_arg, size_param, text_arg
from .._lib import check, lib
from .stream import DEFAULT_STREAM, as_stream

__all__ = [
    "MemoryResource",
    "CudaMemoryResource",
    "ManagedMemoryResource",
    "PinnedMemoryResource",
    "HostMemoryResource",
    "CudaAsyncMemoryResource",
    "PoolMemoryResource",
    "ArenaMemoryResource",
    "FixedSizeMemoryResource",
    "BinningMemoryResource",
    "LimitingResourceAdaptor",
    "LoggingResourceAdaptor",
    "StatisticsResourceAdaptor",
    "TrackingResourceAdaptor",
    "get_current_device_resource",
    "set_current_device_resource",
    "get_per_device_resource",
    "set_per_device_resource",
    "get_current_device_resource_type",
    "get_per_device_resource_type",
    "is_initialized",
]

# crmm_query (crmm/resource.h)
QUERIES = {
    "bytes_in_use": 1,
    "bytes_in_use_peak": 2,
    "bytes_reserved": 3,
    "bytes_reserved_peak": 4,
    "bytes_free": 5,
    "largest_free_block": 6,
    "upstream_blocks": 7,
    "allocations": 8,
    "allocations_peak": 9,
    "allocations_total": 10,
    "bytes_total": 11,
    "maximum_size": 12,
}


# Characters that end a value in libcrmm's "key=value key=value" list (crmm_params_set_list).
_SEPARATORS = frozenset(" \t\n\r\v\f,")


def _param_text(key, value):
    """One `key=value` of a parameter dict, refusing what would change the list's meaning."""
    if not isinstance(key, str):
        raise TypeError(f"parameter names must be str, not {type(key).__name__}")
    if not key or not all(c.islower() or c.isdigit() or c == "_" for c in key) or not key.isascii():
        raise ValueError(f"parameter name {key!r} is not [a-z0-9_]+")
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, int):
        value = str(value)
    elif isinstance(value, float):
        value = repr(value)
    elif isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"parameter {key} must be a str, int, float or bool, not {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"parameter {key} must not contain a NUL byte: {value!r}")
    bad = sorted(set(value) & _SEPARATORS)
    if bad:
        raise ValueError(
            f"parameter {key}={value!r} contains {', '.join(map(repr, bad))}: white space and commas "
            "separate parameters, so a value cannot hold them"
        )
    if value == "":
        raise ValueError(f"parameter {key} has an empty value")
    return f"{key}={value}"


def params_string(params):
    """Plugin parameters as libcrmm's "key=value key=value" string, from a str, a dict or None.
    A dict's values may not hold white space, commas or NUL bytes (they would end the value and
    start another parameter); a str is passed as written (NUL bytes refused)."""
    if params is None:
        return ""
    if isinstance(params, str):
        if "\0" in params:
            raise ValueError(f"params must not contain a NUL byte: {params!r}")
        return params
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict or a 'key=value ...' string, not {type(params).__name__}")
    return " ".join(_param_text(key, value) for key, value in params.items() if value is not None)


class MemoryResource(HandleOwner):
    """A crmm memory resource: a plugin instance, with its upstream chain.

    Parameters
    ----------
    plugin : str
        The plugin's name (``"cuda"``, ``"pool"``, ``"host"``, ...) or the path of a plugin file.
    params : dict or str, optional
        The plugin's parameters (``{"initial_size": "1GiB"}`` or ``"initial_size=1GiB"``).
    upstream : MemoryResource, optional
        The upstream, for adaptors and suballocators (required by those, refused by the others).

    Raises ConfigError for an unknown or bad parameter, PluginError for a plugin that cannot be
    found or loaded, and the plugin's own errors (CudaError without a device for GPU plugins).

    copy.copy and copy.deepcopy give another object of the same class over the same C resource,
    holding a reference of its own (memory allocated through one may be freed through the
    other); pickling raises TypeError.
    """

    def __init__(self, plugin, params=None, upstream=None):
        self._ptr = None
        plugin_name = text_arg(plugin, "plugin")
        if upstream is not None and not isinstance(upstream, MemoryResource):
            raise TypeError(f"upstream must be a MemoryResource, not {type(upstream).__name__}")
        text = params_string(params).encode()
        _lib.ensure_initialized()
        out = ctypes.c_void_p()
        check(
            lib.crmm_resource_create(
                plugin_name,
                text,
                upstream._ptr if upstream is not None else None,
                ctypes.byref(out),
            )
        )
        self._ptr = out.value

    @classmethod
    def _adopt(cls, ptr):
        """Wrap a crmm_resource * whose reference passes to the new object."""
        mr = MemoryResource.__new__(MemoryResource)
        mr._ptr = ptr
        return mr

    @classmethod
    def from_config(cls, name, device=None):
        """The resource `name` of the loaded config ($CRMM_CONFIG, the installed crmm.ini, or
        the one given to crmm.initialize), built for `device` (None: the current device).
        Raises NotFoundError for a name the config lacks, and the plugins' errors."""
        raw = text_arg(name, "name")
        if device is not None:
            device = _device_arg(device)
        _lib.ensure_initialized()
        if device is None:
            device = current_device()
        out = ctypes.c_void_p()
        check(lib.crmm_config_create_resource(lib.crmm_current_config(), raw, device, ctypes.byref(out)))
        return cls._adopt(out.value)

    def __copy__(self):
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin._ptr = lib.crmm_resource_retain(self._ptr) if self._ptr else None
        return twin

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __del__(self, _release=lib.crmm_resource_release):
        if getattr(self, "_ptr", None):
            _release(self._ptr)
            self._ptr = None

    @property
    def ptr(self):
        """The crmm_resource * as an int."""
        return self._ptr

    @property
    def kind(self):
        """The plugin's name, e.g. ``"pool"``."""
        return _lib.text(lib.crmm_resource_kind(self._ptr))

    @property
    def name(self):
        """The config's name for it (``"main"``), or ``""``."""
        return _lib.text(lib.crmm_resource_name(self._ptr))

    @property
    def upstream_mr(self):
        """The upstream resource, or None."""
        up = lib.crmm_resource_upstream(self._ptr)
        return MemoryResource._adopt(lib.crmm_resource_retain(up)) if up else None

    def get_upstream(self):
        return self.upstream_mr

    @property
    def is_device_accessible(self):
        return bool(lib.crmm_resource_is_device_accessible(self._ptr))

    @property
    def is_host_accessible(self):
        return bool(lib.crmm_resource_is_host_accessible(self._ptr))

    def allocate(self, nbytes, stream=DEFAULT_STREAM):
        """Allocate `nbytes` on `stream`; returns the pointer as an int (0 for 0 bytes).
        Raises OutOfMemoryError (a MemoryError) when the resource has no room."""
        nbytes = size_arg(nbytes, "nbytes")
        stream = as_stream(stream)
        out = ctypes.c_void_p()
        check(lib.crmm_resource_allocate(self._ptr, nbytes, stream.handle or None, ctypes.byref(out)))
        return out.value or 0

    def deallocate(self, ptr, nbytes, stream=DEFAULT_STREAM):
        """Free `ptr` of `nbytes` (as allocated) on `stream`. Raises TypeError, ValueError or
        OverflowError for a pointer or size that is not an int in [0, 2**64)."""
        ptr = pointer_arg(ptr, "ptr")
        nbytes = size_arg(nbytes, "nbytes")
        stream = as_stream(stream)
        check(lib.crmm_resource_deallocate(self._ptr, ptr or None, nbytes, stream.handle or None))

    def query(self, what):
        """A figure of the resource: ``"bytes_in_use"``, ``"bytes_reserved"``, ``"allocations"``,
        ... (the keys of QUERIES). Raises UnsupportedError when the resource cannot tell."""
        try:
            code = QUERIES[what]
        except KeyError:
            raise ValueError(f"unknown query {what!r}; one of {', '.join(QUERIES)}") from None
        out = ctypes.c_uint64()
        check(lib.crmm_resource_query(self._ptr, code, ctypes.byref(out)))
        return out.value

    def trim(self):
        """Give cached memory back upstream (nothing for resources that cache nothing)."""
        check(lib.crmm_resource_trim(self._ptr))

    def __eq__(self, other):
        return isinstance(other, MemoryResource) and self._ptr == other._ptr

    def __hash__(self):
        return hash(self._ptr)

    def __repr__(self):
        name = f" {self.name!r}" if self.name else ""
        return f"<crmm MemoryResource {self.kind}{name}>"


class CudaMemoryResource(MemoryResource):
    """cudaMalloc/cudaFree (the ``cuda`` plugin)."""

    def __init__(self):
        super().__init__("cuda")


class ManagedMemoryResource(MemoryResource):
    """cudaMallocManaged (the ``managed`` plugin)."""

    def __init__(self):
        super().__init__("managed")


class PinnedMemoryResource(MemoryResource):
    """Page-locked host memory (the ``pinned`` plugin)."""

    def __init__(self):
        super().__init__("pinned")


class HostMemoryResource(MemoryResource):
    """Aligned host memory (the ``host`` plugin; needs no GPU)."""

    def __init__(self):
        super().__init__("host")


class CudaAsyncMemoryResource(MemoryResource):
    """cudaMallocFromPoolAsync on a private pool (the ``async`` plugin)."""

    def __init__(self, initial_pool_size=None, release_threshold=None):
        super().__init__(
            "async",
            {
                "initial_pool_size": size_param(initial_pool_size, "initial_pool_size"),
                "release_threshold": size_param(release_threshold, "release_threshold"),
            },
        )


class PoolMemoryResource(MemoryResource):
    """The coalescing pool suballocator over `upstream_mr` (the ``pool`` plugin)."""

    def __init__(self, upstream_mr, initial_pool_size=None, maximum_pool_size=None):
        params = {
            "initial_size": size_param(initial_pool_size, "initial_pool_size"),
            "maximum_size": size_param(maximum_pool_size, "maximum_pool_size"),
        }
        super().__init__("pool", params, upstream_mr)


class ArenaMemoryResource(MemoryResource):
    """Per-thread arenas over `upstream_mr` (the ``arena`` plugin)."""

    def __init__(self, upstream_mr, arena_size=None, dump_log_on_failure=False):
        params = {"arena_size": size_param(arena_size, "arena_size"), "dump_log_on_failure": bool(dump_log_on_failure)}
        super().__init__("arena", params, upstream_mr)


class FixedSizeMemoryResource(MemoryResource):
    """Equal blocks over `upstream_mr` (the ``fixed_size`` plugin)."""

    def __init__(self, upstream_mr, block_size=1 << 20, blocks_to_preallocate=128):
        super().__init__(
            "fixed_size",
            {"block_size": size_param(block_size, "block_size"), "blocks_to_preallocate": size_arg(blocks_to_preallocate, "blocks_to_preallocate")},
            upstream_mr,
        )


class BinningMemoryResource(MemoryResource):
    """Fixed-size bins 2**min_size_exponent .. 2**max_size_exponent (the ``binning`` plugin)."""

    def __init__(self, upstream_mr, min_size_exponent=None, max_size_exponent=None):
        super().__init__(
            "binning", {"min_size_exponent": min_size_exponent, "max_size_exponent": max_size_exponent}, upstream_mr
        )


class LimitingResourceAdaptor(MemoryResource):
    """Refuses allocations past `allocation_limit` bytes (the ``limiting`` plugin)."""

    def __init__(self, upstream_mr, allocation_limit):
        super().__init__("limiting", {"allocation_limit": size_param(allocation_limit, "allocation_limit")}, upstream_mr)


class LoggingResourceAdaptor(MemoryResource):
    """Logs every allocation and free as CSV to `log_file_name` (the ``logging`` plugin)."""

    def __init__(self, upstream_mr, log_file_name=None, auto_flush=False):
        super().__init__("logging", {"file": log_file_name, "auto_flush": auto_flush}, upstream_mr)

    def flush(self):
        check(lib.crmm_resource_control_kind(self._ptr, b"logging", 0x300, None))


class StatisticsResourceAdaptor(MemoryResource):
    """Counts live, peak and total bytes and allocations (the ``statistics`` plugin); read them
    with query()."""

    def __init__(self, upstream_mr):
        super().__init__("statistics", None, upstream_mr)


class TrackingResourceAdaptor(MemoryResource):
    """Tracks every outstanding allocation (the ``tracking`` plugin)."""

    def __init__(self, upstream_mr, capture_stacks=False):
        super().__init__("tracking", {"capture_stacks": capture_stacks}, upstream_mr)


def current_device():
    """The current CUDA device. Raises CudaError without a device."""
    d = ctypes.c_int(0)
    check(lib.crmm_cuda_current_device(ctypes.byref(d)))
    return d.value


def get_current_device_resource():
    """The current device's resource (the config's default until set). Raises CudaError without
    a device, and the default's errors."""
    _lib.ensure_initialized()
    ptr = lib.crmm_get_current_device_resource_ref()
    if not ptr:
        _lib.raise_last()
    return MemoryResource._adopt(ptr)


def get_per_device_resource(device):
    """The resource of `device`. Raises InvalidArgumentError for a device that does not exist."""
    _lib.ensure_initialized()
    ptr = lib.crmm_get_per_device_resource_ref(_device_arg(device))
    if not ptr:
        _lib.raise_last()
    return MemoryResource._adopt(ptr)


def _mr_arg(mr):
    if not isinstance(mr, MemoryResource):
        raise TypeError(f"mr must be a MemoryResource, not {type(mr).__name__}")
    return mr


def _device_arg(device):
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device must be an int, not {type(device).__name__}")
    if not -(1 << 31) <= device < 1 << 31:
        raise ValueError(f"device {device} is not a device ordinal")
    return device


def set_current_device_resource(mr):
    """Make `mr` the current device's resource (device buffers, the allocators and PyTorch
    allocate from it from now on). Raises CudaError without a device."""
    _lib.ensure_initialized()
    lib.crmm_clear_error()
    previous = lib.crmm_set_current_device_resource(_mr_arg(mr)._ptr)
    if previous:
        lib.crmm_resource_release(previous)
    elif lib.crmm_last_status() != 0:
        _lib.raise_last()


def set_per_device_resource(device, mr):
    """Make `mr` the resource of `device`. Raises InvalidArgumentError for a device that does not
    exist."""
    _lib.ensure_initialized()
    lib.crmm_clear_error()
    previous = lib.crmm_set_per_device_resource(_device_arg(device), _mr_arg(mr)._ptr)
    if previous:
        lib.crmm_resource_release(previous)
    elif lib.crmm_last_status() != 0:
        _lib.raise_last()


def get_current_device_resource_type():
    """The class of the current device's resource (MemoryResource: crmm resources are plugins)."""
    return type(get_current_device_resource())


def get_per_device_resource_type(device):
    return type(get_per_device_resource(device))


def _initialize(
    pool_allocator=False,
    managed_memory=False,
    initial_pool_size=None,
    maximum_pool_size=None,
    devices=0,
    logging=False,
    log_file_name=None,
):
    """Build RMM's default chain for each device (see crmm.reinitialize) and make it the
    device's resource. Every chain is built before any is set, so a failure changes nothing."""
    from .._reinitialize import _devices_arg, _log_file_for

    chains = []
    for device in _devices_arg(devices):
        with _lib.device_context(device):
            mr = ManagedMemoryResource() if managed_memory else CudaMemoryResource()
            if pool_allocator:
                mr = PoolMemoryResource(mr, initial_pool_size=initial_pool_size, maximum_pool_size=maximum_pool_size)
            if logging:
                mr = LoggingResourceAdaptor(mr, log_file_name=_log_file_for(log_file_name, device))
        chains.append((device, mr))
    for device, mr in chains:
        set_per_device_resource(device, mr)


def is_initialized():
    """True once crmm has loaded a config (on first use, or crmm.initialize)."""
    return _lib.is_initialized()
