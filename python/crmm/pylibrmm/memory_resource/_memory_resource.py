"""Memory resources: rmm.mr over libcrmm's plugins, the config and the per-device registry.

A MemoryResource holds one reference to a crmm_resource. Build one from a plugin name and its
parameters (``MemoryResource("pool", {"initial_size": "1GiB"}, upstream=MemoryResource("cuda"))``),
from a resource of the loaded config (``MemoryResource.from_config("main")``), or with RMM's class
names below (CudaMemoryResource, PoolMemoryResource, ...). The current device's resource comes
from the config until set_current_device_resource replaces it, as in C.
"""

import ctypes
import functools
import os
import threading
import warnings
import weakref

from ... import _lib
from ..._errors import ConfigError, CrmmIOError, CudaError, StateError, UnsupportedError
from ..._handles import HandleOwner
from ..._host import int_arg, pointer_arg, size_arg, size_param, text_arg
from ..._lib import check, lib
from ..stream import DEFAULT_STREAM, as_stream

__all__ = [
    "DeviceMemoryResource",
    "MemoryResource",
    "UpstreamResourceAdaptor",
    "PinnedHostMemoryResource",
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
    "PrefetchResourceAdaptor",
    "FailureCallbackResourceAdaptor",
    "PLUGIN_CLASSES",
    "get_current_device_resource",
    "set_current_device_resource",
    "get_per_device_resource",
    "set_per_device_resource",
    "is_initialized",
    "available_device_memory",
    "enable_logging",
    "disable_logging",
    "get_log_filenames",
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
# the plugins' own (crmm/pool.h, crmm/async.h): (kind, number), asked of the first layer of that
# kind in the chain; CRMM_QUERY_POOL_DEVICE_SYNCS is "pool_device_syncs" of kind "pool"
QUERIES.update({name[len("CRMM_QUERY_"):].lower(): (name.split("_")[2].lower(), number)
                for name, number in _lib.QUERIES.items()})


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
    if value == "":
        raise ValueError(f"parameter {key} has an empty value")
    if set(value) & _SEPARATORS or value.startswith('"'):
        # quoted, as libcrmm reads a value that holds white space or commas
        value = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{key}={value}"


def params_string(params):
    """Plugin parameters as libcrmm's "key=value key=value" string, from a str, a dict or None.
    A dict's value that holds white space or commas is written in double quotes (libcrmm keeps
    them then), NUL bytes are refused; a str is passed as written (NUL bytes refused)."""
    if params is None:
        return ""
    if isinstance(params, str):
        if "\0" in params:
            raise ValueError(f"params must not contain a NUL byte: {params!r}")
        return params
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict or a 'key=value ...' string, not {type(params).__name__}")
    return " ".join(_param_text(key, value) for key, value in params.items() if value is not None)


# The Python object standing for each live C resource (weak: the object owns the reference),
# and the object each device's resource was set to or last returned as (strong, as RMM keeps it).
_objects = weakref.WeakValueDictionary()
_per_device = {}
_registry_lock = threading.RLock()


def _remember(mr):
    """Record `mr` as the object of its resource, unless a live object stands for it already;
    one released by hand (_ptr None) is replaced: its resource may be gone and a new one made
    at its address."""
    with _registry_lock:
        known = _objects.get(mr._ptr)
        if known is None or known._ptr != mr._ptr:
            _objects[mr._ptr] = mr


def _forget(mr, ptr, _objects=_objects, _lock=_registry_lock):
    """Take `mr` out of the registry before it releases `ptr` (its __del__, also called by hand):
    a resource made later at the same address must get an entry of its own. The registry is
    bound here, since __del__ may run while the interpreter clears the module."""
    with _lock:
        if _objects.get(ptr) is mr:
            del _objects[ptr]


def _refuse_second_init(mr):
    """StateError when `mr` already holds a resource: __init__ called again on a live object
    would drop its reference (and a subclass's callbacks with it) while allocations and
    adaptors still use it."""
    if getattr(mr, "_ptr", None):
        raise StateError(f"this {type(mr).__name__} is already made; __init__ cannot make it again", "CRMM_ERROR_STATE")


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
    other); pickling raises TypeError. Calling __init__ again on a made object (this class's or
    a subclass's) raises StateError before it changes anything.
    """

    def __init_subclass__(cls, **kwargs):
        """Every subclass's own __init__ refuses a second call first, before its body replaces
        callbacks or state that the live resource still uses."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def init_once(self, *args, **kw):
            _refuse_second_init(self)
            init(self, *args, **kw)

        cls.__init__ = init_once

    def __init__(self, plugin, params=None, upstream=None):
        _refuse_second_init(self)
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
                upstream._handle if upstream is not None else None,
                ctypes.byref(out),
            )
        )
        self._ptr = out.value
        self._upstream = upstream
        _remember(self)

    @classmethod
    def _adopt(cls, ptr):
        """The Python object of a crmm_resource * whose reference passes to it: the object that
        already stands for that resource, else a new one of its plugin's class."""
        return _object_for(ptr)

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

    def __del__(self, _release=lib.crmm_resource_release, _forget=_forget):
        ptr = getattr(self, "_ptr", None)
        if ptr:
            _forget(self, ptr)
            _release(ptr)
            self._ptr = None

    @property
    def ptr(self):
        """The crmm_resource * as an int (None once released)."""
        return self._ptr

    @property
    def _handle(self):
        """The crmm_resource *, or StateError once the object's reference was released (its
        __del__ called by hand)."""
        ptr = getattr(self, "_ptr", None)
        if not ptr:
            raise _lib.error_for(10, f"this {type(self).__name__} was released; it cannot be used")
        return ptr

    @property
    def kind(self):
        """The plugin's name, e.g. ``"pool"``."""
        return _lib.text(lib.crmm_resource_kind(self._handle))

    @property
    def name(self):
        """The config's name for it (``"main"``), or ``""``."""
        return _lib.text(lib.crmm_resource_name(self._handle))

    def _upstream_or_none(self):
        """The upstream resource (the object given when this one was made, or the object of
        the C upstream's plugin class for a resource from the config), or None for a resource
        without one."""
        up = getattr(self, "_upstream", None)
        if up is None:
            c_up = lib.crmm_resource_upstream(self._handle)
            if c_up:
                up = self._upstream = _object_for(lib.crmm_resource_retain(c_up))
        return up

    @property
    def upstream_mr(self):
        """The upstream resource. A resource without one (cuda, host, async, ...) has no such
        attribute (AttributeError), as in RMM, where only adaptors have it: code that walks a
        chain with ``hasattr(mr, "upstream_mr")`` stops at its last resource."""
        up = self._upstream_or_none()
        if up is None:
            raise AttributeError(f"{type(self).__name__} ({self.kind}) has no upstream resource")
        return up

    def get_upstream(self):
        """The upstream resource; AttributeError for a resource without one (see upstream_mr)."""
        return self.upstream_mr

    @property
    def is_device_accessible(self):
        return bool(lib.crmm_resource_is_device_accessible(self._handle))

    @property
    def is_host_accessible(self):
        return bool(lib.crmm_resource_is_host_accessible(self._handle))

    def allocate(self, nbytes, stream=DEFAULT_STREAM):
        """Allocate `nbytes` on `stream`; returns the pointer as an int (0 for 0 bytes).
        Raises OutOfMemoryError (a MemoryError) when the resource has no room."""
        nbytes = size_arg(nbytes, "nbytes")
        stream = as_stream(stream)
        out = ctypes.c_void_p()
        _lib.take_callback_error()  # one left by a failure a C layer recovered from is not ours
        check(lib.crmm_resource_allocate(self._handle, nbytes, stream.handle or None, ctypes.byref(out)))
        return out.value or 0

    def deallocate(self, ptr, nbytes, stream=DEFAULT_STREAM):
        """Free `ptr` of `nbytes` (as allocated) on `stream`. Raises TypeError, ValueError or
        OverflowError for a pointer or size that is not an int in [0, 2**64)."""
        ptr = pointer_arg(ptr, "ptr")
        nbytes = size_arg(nbytes, "nbytes")
        stream = as_stream(stream)
        check(lib.crmm_resource_deallocate(self._handle, ptr or None, nbytes, stream.handle or None))

    def query(self, what):
        """A figure of the resource: ``"bytes_in_use"``, ``"bytes_reserved"``, ``"allocations"``,
        ... (the keys of QUERIES). Raises UnsupportedError when the resource cannot tell."""
        try:
            code = QUERIES[what]
        except KeyError:
            raise ValueError(f"unknown query {what!r}; one of {', '.join(QUERIES)}") from None
        except TypeError:  # unhashable: a list, a dict
            raise TypeError(f"what must be a str, one of {', '.join(QUERIES)}; not {type(what).__name__}") from None
        out = ctypes.c_uint64()
        if type(code) is tuple:  # a plugin's own: asked of the first layer of its kind
            check(lib.crmm_resource_query_kind(self._handle, code[0].encode(), code[1], ctypes.byref(out)))
        else:
            check(lib.crmm_resource_query(self._handle, code, ctypes.byref(out)))
        return out.value

    def trim(self):
        """Give cached memory back upstream (nothing for resources that cache nothing)."""
        check(lib.crmm_resource_trim(self._handle))

    def __eq__(self, other):
        return isinstance(other, MemoryResource) and self._ptr == other._ptr

    def __hash__(self):
        return hash(self._ptr)

    def __repr__(self):
        if not getattr(self, "_ptr", None):  # repr must not raise: it shows in tracebacks and logs
            return f"<crmm {type(self).__name__} (released)>"
        name = f" {self.name!r}" if self.name else ""
        return f"<crmm MemoryResource {self.kind}{name}>"


DeviceMemoryResource = MemoryResource  # RMM's name of the base class


class UpstreamResourceAdaptor(MemoryResource):
    """A resource over another one, `upstream_mr` (RMM's base of the suballocators and
    adaptors); get_upstream() returns the same object."""


def _control(mr, kind, op, arg):
    """crmm_resource_control_kind on the first `kind` layer of mr's chain."""
    check(lib.crmm_resource_control_kind(mr._handle, kind, op, arg))


class CudaMemoryResource(MemoryResource):
    """cudaMalloc/cudaFree (the ``cuda`` plugin)."""

    def __init__(self):
        super().__init__("cuda")


class ManagedMemoryResource(MemoryResource):
    """cudaMallocManaged (the ``managed`` plugin)."""

    def __init__(self):
        super().__init__("managed")


class PinnedHostMemoryResource(MemoryResource):
    """Page-locked host memory (the ``pinned`` plugin)."""

    def __init__(self):
        super().__init__("pinned")


PinnedMemoryResource = PinnedHostMemoryResource


class HostMemoryResource(MemoryResource):
    """Aligned host memory (the ``host`` plugin; needs no GPU)."""

    def __init__(self):
        super().__init__("host")


_ASYNC_GET_POOL = _lib.OPS["CRMM_ASYNC_OP_GET_POOL"]


class CudaAsyncMemoryResource(MemoryResource):
    """cudaMallocFromPoolAsync on a private pool (the ``async`` plugin). `enable_ipc` makes its
    allocations exportable as POSIX file descriptors, `enable_fabric` as fabric handles, one of
    the two: ValueError for both, which RMM combines into one pool (docs/ipc.md says why crmm
    does not). Both are read by their truth value, as RMM reads them."""

    def __init__(self, initial_pool_size=None, release_threshold=None, enable_ipc=False, enable_fabric=False):
        enable_ipc, enable_fabric = bool(enable_ipc), bool(enable_fabric)
        if enable_ipc and enable_fabric:
            raise ValueError("crmm's async pool allows one handle type: enable_ipc or enable_fabric, not both")
        params = {
            "initial_pool_size": size_param(initial_pool_size, "initial_pool_size"),
            "release_threshold": size_param(release_threshold, "release_threshold"),
            "enable_ipc": enable_ipc,
            "enable_fabric": enable_fabric,
        }
        try:
            super().__init__("async", params)
        except UnsupportedError as e:
            if not (enable_ipc or enable_fabric):
                raise
            # RMM's words end the message: code written for RMM matches them
            raise UnsupportedError(f"{e}: Requested IPC memory handle type not supported", e.status) from None

    def pool_handle(self):
        """The pool's cudaMemPool_t as an int (owned by the resource: do not destroy it)."""
        pool = ctypes.c_void_p()
        _control(self, b"async", _ASYNC_GET_POOL, ctypes.byref(pool))
        return pool.value or 0


def check_pool_sizes(initial, maximum):
    """Refuse an initial pool size above the maximum (byte counts, as size_param gives them;
    percentages are the plugin's to check), as the pool plugin does, in RMM's words, before
    anything is built. Raises ConfigError (a RuntimeError, as RMM's)."""
    if isinstance(initial, int) and isinstance(maximum, int) and initial > maximum:
        raise ConfigError(
            f"Initial pool size exceeds the maximum pool size: initial_pool_size {initial} > maximum_pool_size {maximum}",
            "CRMM_ERROR_CONFIG",
        )


class PoolMemoryResource(UpstreamResourceAdaptor):
    """The coalescing pool suballocator over `upstream_mr` (the ``pool`` plugin)."""

    def __init__(self, upstream_mr, initial_pool_size=None, maximum_pool_size=None):
        params = {
            "initial_size": size_param(initial_pool_size, "initial_pool_size"),
            "maximum_size": size_param(maximum_pool_size, "maximum_pool_size"),
        }
        check_pool_sizes(params["initial_size"], params["maximum_size"])
        super().__init__("pool", params, upstream_mr)

    def pool_size(self):
        """Bytes the pool holds from its upstream (in use or free)."""
        return self.query("bytes_reserved")


class ArenaMemoryResource(UpstreamResourceAdaptor):
    """Per-thread arenas over `upstream_mr` (the ``arena`` plugin)."""

    def __init__(self, upstream_mr, arena_size=None, dump_log_on_failure=False):
        params = {"arena_size": size_param(arena_size, "arena_size"), "dump_log_on_failure": bool(dump_log_on_failure)}
        super().__init__("arena", params, upstream_mr)


class FixedSizeMemoryResource(UpstreamResourceAdaptor):
    """Equal blocks over `upstream_mr` (the ``fixed_size`` plugin)."""

    def __init__(self, upstream_mr, block_size=1 << 20, blocks_to_preallocate=128):
        super().__init__(
            "fixed_size",
            {"block_size": size_param(block_size, "block_size"), "blocks_to_preallocate": size_arg(blocks_to_preallocate, "blocks_to_preallocate")},
            upstream_mr,
        )


_BINNING_ADD_BIN = _lib.OPS["CRMM_BINNING_OP_ADD_BIN"]


def _exponent_arg(value, name):
    """A bin exponent as RMM's int8_t argument takes it (None: crmm's "no bins"): TypeError for
    what is not an int, OverflowError outside [-128, 127]."""
    if value is None:
        return None
    if not isinstance(value, int):
        index = getattr(type(value), "__index__", None)
        if index is None:
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        value = index(value)
    if not -128 <= value <= 127:
        raise OverflowError(f"{name} {value} does not fit in int8_t")
    return int(value)  # a bool as the int it is


class BinningMemoryResource(UpstreamResourceAdaptor):
    """Fixed-size bins 2**min_size_exponent .. 2**max_size_exponent (the ``binning`` plugin);
    add_bin adds more. add_bin is not safe while other threads use the resource (as in RMM).
    Without bins (RMM's default -1 for either exponent, or None for both) every request goes
    to the upstream until add_bin adds one."""

    def __init__(self, upstream_mr, min_size_exponent=-1, max_size_exponent=-1):
        min_size_exponent = _exponent_arg(min_size_exponent, "min_size_exponent")
        max_size_exponent = _exponent_arg(max_size_exponent, "max_size_exponent")
        if min_size_exponent == -1 or max_size_exponent == -1:  # RMM's "no bins yet": either one
            min_size_exponent = max_size_exponent = None
        self._bin_mrs = []
        super().__init__(
            "binning", {"min_size_exponent": min_size_exponent, "max_size_exponent": max_size_exponent}, upstream_mr
        )

    def add_bin(self, allocation_size, bin_resource=None):
        """Add a bin for requests up to `allocation_size` bytes (rounded up to 256) and above the
        next smaller bin: `bin_resource` serves them, or without one a new fixed-size resource of
        that block size over the upstream. A size that already has a bin keeps it (as in RMM).
        Raises ValueError for a size of 0 or above 2**63 or a bin resource whose memory is not
        usable where this resource's is, TypeError for a bin_resource that is not a
        MemoryResource, crmm.StateError while the next larger bin has blocks live (the new bin
        would take over some of their sizes, and so their frees)."""
        size = size_arg(allocation_size, "allocation_size")
        if bin_resource is not None and not isinstance(bin_resource, MemoryResource):
            raise TypeError(f"bin_resource must be a MemoryResource, not {type(bin_resource).__name__}")
        arg = _lib.BinningBin(size, bin_resource._handle if bin_resource is not None else None, 0)
        _control(self, b"binning", _BINNING_ADD_BIN, ctypes.byref(arg))
        if arg.added and bin_resource is not None:
            self._bins().append(bin_resource)

    def _bins(self):
        """The list behind bin_mrs, made on first use: an object made for a resource built in C
        (_object_for: from the config, an upstream, a device's resource) skips __init__."""
        bins = self.__dict__.get("_bin_mrs")
        if bins is None:
            bins = self._bin_mrs = []
        return bins

    @property
    def bin_mrs(self):
        """The bin resources given to add_bin that serve a bin, in the order added (a new list;
        RMM's list)."""
        return list(self._bins())


class LimitingResourceAdaptor(UpstreamResourceAdaptor):
    """Refuses allocations past `allocation_limit` bytes (the ``limiting`` plugin)."""

    def __init__(self, upstream_mr, allocation_limit):
        super().__init__("limiting", {"allocation_limit": size_param(allocation_limit, "allocation_limit")}, upstream_mr)

    def get_allocated_bytes(self):
        """Bytes allocated through this adaptor and not yet freed."""
        return self.query("bytes_in_use")

    def get_allocation_limit(self):
        """The limit in bytes."""
        return self.query("maximum_size")


_LOGGING_FLUSH, _LOGGING_GET_FILE = _lib.OPS["CRMM_LOGGING_OP_FLUSH"], _lib.OPS["CRMM_LOGGING_OP_GET_FILE"]


class LoggingResourceAdaptor(UpstreamResourceAdaptor):
    """Logs every allocation and free as CSV (the ``logging`` plugin) to `log_file_name` with
    ``.dev<N>`` before its extension, N the current device (0 without one), made absolute, as
    RMM names it ("log.csv" -> "/cwd/log.dev0.csv"; get_file_name() says which); a name that is
    a device file or a FIFO (/dev/null) is taken as it is. '%' is not one of the plugin's
    escapes here (use MemoryResource("logging", {"file": ...}) for those). None:
    $RMM_LOG_FILE (as RMM), else the plugin's default, $CRMM_LOG_FILE as it is. Raises
    ValueError when none of the three names a file (as RMM)."""

    def __init__(self, upstream_mr, log_file_name=None, auto_flush=False):
        if log_file_name is None:
            log_file_name = os.environ.get("RMM_LOG_FILE") or None
            if log_file_name is None and not os.environ.get("CRMM_LOG_FILE"):
                raise ValueError(
                    "RMM log file must be specified either using log_file_name= argument or "
                    "RMM_LOG_FILE environment variable (or $CRMM_LOG_FILE)"
                )
        if log_file_name is not None:
            from ..._host import path_arg
            from ..._reinitialize import _log_file_for

            try:
                device = current_device()
            except CudaError:
                device = 0
            name = _log_file_for(os.fsdecode(path_arg(log_file_name, "log_file_name")), device)
            log_file_name = name.replace("%", "%%")
        super().__init__("logging", {"file": log_file_name, "auto_flush": bool(auto_flush)}, upstream_mr)

    def flush(self):
        """Write the buffered lines to the file. Raises CrmmIOError when the write fails, and
        StateError in a child forked after the adaptor was made (it writes nothing there)."""
        _control(self, b"logging", _LOGGING_FLUSH, None)

    def get_file_name(self):
        """The file the log is written to (its name after expansion)."""
        name = ctypes.c_char_p()
        _control(self, b"logging", _LOGGING_GET_FILE, ctypes.byref(name))
        return os.fsdecode(name.value) if name.value else ""


_STATISTICS_GET, _STATISTICS_PUSH, _STATISTICS_POP = (_lib.OPS["CRMM_STATISTICS_OP_" + op] for op in ("GET", "PUSH", "POP"))


class StatisticsResourceAdaptor(UpstreamResourceAdaptor):
    """Counts live, peak and total bytes and allocations (the ``statistics`` plugin), in a stack
    of frames: push_counters starts a fresh one, pop_counters ends it."""

    def __init__(self, upstream_mr):
        super().__init__("statistics", None, upstream_mr)

    def _frame(self, op):
        from ...statistics import Statistics

        counters = _lib.AllocCounters()
        _control(self, b"statistics", op, ctypes.byref(counters))
        return Statistics._from_counters(counters)

    @property
    def allocation_counts(self):
        """The counters of the top frame (a crmm.statistics.Statistics)."""
        return self._frame(_STATISTICS_GET)

    def push_counters(self):
        """Start a new frame; returns the counters of the frame below it as they were."""
        return self._frame(_STATISTICS_PUSH)

    def pop_counters(self):
        """End the top frame, folding it into the one below; returns its counters. Raises
        EmptyCounterStackError (a StateError and, as RMM raises, an IndexError: "cannot pop the
        last counter pair") when only the base frame is left."""
        try:
            return self._frame(_STATISTICS_POP)
        except StateError as e:
            raise EmptyCounterStackError(f"cannot pop the last counter pair: {e}", e.status) from None


class EmptyCounterStackError(StateError, IndexError):
    """pop_counters on a StatisticsResourceAdaptor with no pushed frame."""


_TRACKING_BYTES, _TRACKING_STRING, _TRACKING_LOG = (_lib.OPS["CRMM_TRACKING_OP_" + op] for op in ("BYTES", "STRING", "LOG"))
_libc_free = ctypes.CDLL(None).free
_libc_free.argtypes = [ctypes.c_void_p]
_libc_free.restype = None


class TrackingResourceAdaptor(UpstreamResourceAdaptor):
    """Tracks every outstanding allocation (the ``tracking`` plugin)."""

    def __init__(self, upstream_mr, capture_stacks=False):
        super().__init__("tracking", {"capture_stacks": bool(capture_stacks)}, upstream_mr)

    def get_allocated_bytes(self):
        """Bytes allocated through this adaptor and not yet freed."""
        out = ctypes.c_uint64()
        _control(self, b"tracking", _TRACKING_BYTES, ctypes.byref(out))
        return out.value

    def get_outstanding_allocations_str(self):
        """The outstanding allocations, one per line (with their stacks when captured); "" when
        there are none, as RMM gives it (the C report's summary line is left out then)."""
        text = ctypes.c_void_p()
        _control(self, b"tracking", _TRACKING_STRING, ctypes.byref(text))
        try:
            report = ctypes.string_at(text.value).decode("utf-8", "replace") if text.value else ""
        finally:
            _libc_free(text.value)
        return "" if report.startswith("Outstanding allocations: 0 ") else report

    def log_outstanding_allocations(self):
        """Write the outstanding allocations to crmm's log at debug level."""
        level = ctypes.c_int(1)
        _control(self, b"tracking", _TRACKING_LOG, ctypes.byref(level))


_FAILURE_CALLBACK_SET = _lib.OPS["CRMM_FAILURE_CALLBACK_OP_SET"]
_orphaned_callbacks = []  # callbacks of resources that outlived their Python object


class FailureCallbackResourceAdaptor(UpstreamResourceAdaptor):
    """Calls ``callback(nbytes)`` when `upstream_mr` runs out of memory: True retries the
    allocation, False lets the failure through (the ``failure_callback`` plugin). An exception
    raised by the callback fails the allocation and is raised by it, as RMM raises it (a
    RuntimeError or MemoryError as it is, any other as a RuntimeError). Raises TypeError when
    `callback` is not callable."""

    def __init__(self, upstream_mr, callback):
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        super().__init__("failure_callback", None, upstream_mr)

        def on_failure(nbytes, _arg):
            try:
                retry = bool(callback(nbytes))
            except BaseException as e:  # C cannot carry it: the failing call raises it
                _lib.stash_callback_error(e)
                return False
            if retry:
                _lib.take_callback_error()  # the failure is being dealt with: not the caller's
            return retry

        self._callback = callback
        self._c_callback = _lib.FAILURE_CALLBACK(on_failure)
        args = _lib.FailureCallbackArgs(self._c_callback, None)
        _control(self, b"failure_callback", _FAILURE_CALLBACK_SET, ctypes.byref(args))

    # every name bound as an argument: at interpreter exit this may run after the module's
    # globals are gone
    def __del__(self, _release=lib.crmm_resource_release, _refcount=lib.crmm_resource_refcount,
                _control=lib.crmm_resource_control, _set=_FAILURE_CALLBACK_SET, _none=_lib.FailureCallbackArgs,
                _byref=ctypes.byref, _keep=_lib.keep_forever, _kept=_orphaned_callbacks):
        c_callback = getattr(self, "_c_callback", None)
        ptr = getattr(self, "_ptr", None)
        if c_callback is not None and ptr:
            # The C resource may live on (under an adaptor, as a device's resource): keep the
            # callback it calls alive then, or take it out when this is the last reference.
            if _refcount(ptr) > 1:
                _keep(c_callback, _kept)
            else:
                _control(ptr, _set, _byref(_none()))
        super().__del__(_release)


class PrefetchResourceAdaptor(UpstreamResourceAdaptor):
    """Prefetches each managed allocation to the device on its stream (the ``prefetch``
    plugin)."""

    def __init__(self, upstream_mr):
        super().__init__("prefetch", None, upstream_mr)


# The class of each plugin's resources, for resources built in C (the config's, an upstream).
PLUGIN_CLASSES = {
    "cuda": CudaMemoryResource,
    "managed": ManagedMemoryResource,
    "pinned": PinnedHostMemoryResource,
    "host": HostMemoryResource,
    "async": CudaAsyncMemoryResource,
    "pool": PoolMemoryResource,
    "arena": ArenaMemoryResource,
    "fixed_size": FixedSizeMemoryResource,
    "binning": BinningMemoryResource,
    "limiting": LimitingResourceAdaptor,
    "logging": LoggingResourceAdaptor,
    "statistics": StatisticsResourceAdaptor,
    "tracking": TrackingResourceAdaptor,
    "prefetch": PrefetchResourceAdaptor,
    "failure_callback": FailureCallbackResourceAdaptor,
}

def _object_for(ptr):
    """The Python object of `ptr`, a new C reference that passes to it (released when the
    object already exists)."""
    with _registry_lock:
        mr = _objects.get(ptr)
        if mr is not None and mr._ptr == ptr:
            lib.crmm_resource_release(ptr)
            return mr
        kind = _lib.text(lib.crmm_resource_kind(ptr))
        cls = PLUGIN_CLASSES.get(kind)
        if cls is None:
            cls = UpstreamResourceAdaptor if lib.crmm_resource_upstream(ptr) else MemoryResource
        mr = cls.__new__(cls)
        mr._ptr = ptr
        mr._upstream = None
        _objects[ptr] = mr
    # Tie the chain's existing objects to the new one now, while they are alive: a resource set
    # from Python and then wrapped in C (crmm_enable_logging) comes back as that same object later.
    mr._upstream_or_none()
    return mr


def current_device():
    """The current CUDA device; 0 without one when the config's resource for device 0 is host
    memory (as in C, so that a program written for the GPU runs over a host config). Raises
    CudaError without a device otherwise."""
    d = ctypes.c_int(0)
    try:
        check(lib.crmm_cuda_current_device(ctypes.byref(d)))
    except CudaError:
        ptr = lib.crmm_get_current_device_resource_ref()  # C takes device 0 then, or fails alike
        if not ptr:
            lib.crmm_clear_error()
            raise
        lib.crmm_resource_release(ptr)
        return 0
    return d.value


def _current_objects():
    """{device: object} of the devices whose resource is still the object recorded for them
    (a resource replaced in C since, by crmm_enable_logging or crmm_disable_logging, is left
    out)."""
    current = {}
    for device, mr in list(_per_device.items()):
        ptr = lib.crmm_get_per_device_resource_ref(device)
        if not ptr:
            lib.crmm_clear_error()
            continue
        if ptr == mr._ptr:
            current[device] = mr
        lib.crmm_resource_release(ptr)
    return current


def _recorded_devices():
    """The devices whose resource was set from Python or read through get_current_device_resource
    or get_per_device_resource, first recorded first: the devices RMM keeps a resource for (its
    per-device dict gains a key when a resource is set and when one is looked up)."""
    return list(_per_device)


def _resource_now(device):
    """The object of the resource C holds for `device` now (which may have been replaced in C
    since it was recorded), without recording it; None when C has none for that device."""
    ptr = lib.crmm_get_per_device_resource_ref(device)
    if not ptr:
        lib.crmm_clear_error()
        return None
    return _object_for(ptr)


def _per_device_object(device, ptr):
    mr = _object_for(ptr)
    _per_device[device] = mr
    return mr


def get_current_device_resource():
    """The current device's resource: the object given to set_current_device_resource (or
    set_per_device_resource), else one of the class of the config's resource, the same object
    on every call. Raises CudaError without a device, and the default's errors."""
    _lib.ensure_initialized()
    ptr = lib.crmm_get_current_device_resource_ref()
    if not ptr:
        _lib.raise_last()
    return _per_device_object(current_device(), ptr)


def get_per_device_resource(device):
    """The resource of `device` (as get_current_device_resource). Raises InvalidArgumentError
    for a device that does not exist."""
    device = _device_arg(device)
    _lib.ensure_initialized()
    ptr = lib.crmm_get_per_device_resource_ref(device)
    if not ptr:
        _lib.raise_last()
    return _per_device_object(device, ptr)


def _mr_arg(mr):
    if not isinstance(mr, MemoryResource):
        raise TypeError(f"mr must be a MemoryResource, not {type(mr).__name__}")
    return mr


def _device_arg(device):
    """A device ordinal: an int, or an integer of another type (numpy's) through __index__, as
    RMM's `int device` arguments take it. TypeError for other types (bool too), ValueError
    outside C's int."""
    device = int_arg(device, "device")
    if not -(1 << 31) <= device < 1 << 31:
        raise ValueError(f"device {device} is not a device ordinal")
    return device


def _set(device, mr, c_set):
    _lib.ensure_initialized()
    lib.crmm_clear_error()
    previous = c_set()
    if previous:
        lib.crmm_resource_release(previous)
    elif lib.crmm_last_status() != 0:
        _lib.raise_last()
    _per_device[device if device is not None else current_device()] = mr


def set_current_device_resource(mr):
    """Make `mr` the current device's resource (device buffers, the allocators and PyTorch
    allocate from it from now on); get_current_device_resource() returns `mr` itself. Raises
    TypeError for anything but a MemoryResource, CudaError without a device."""
    _mr_arg(mr)
    _set(None, mr, lambda: lib.crmm_set_current_device_resource(mr._handle))


def set_per_device_resource(device, mr):
    """Make `mr` the resource of `device`. Raises TypeError for bad types,
    InvalidArgumentError for a device that does not exist."""
    device = _device_arg(device)
    _mr_arg(mr)
    _set(device, mr, lambda: lib.crmm_set_per_device_resource(device, mr._handle))


def _warn_type_getter_deprecated(message):
    """RMM 26.06's FutureWarning for the two type getters, unless install_as_rmm was asked for an
    older release's behaviour (in which they were not deprecated). Names the caller's caller."""
    from ..._rmm_alias import type_getters_deprecated

    if type_getters_deprecated():
        warnings.warn(message, FutureWarning, stacklevel=3)


def get_current_device_resource_type():
    """The class of the current device's resource: RMM's get_current_device_resource_type,
    deprecated in 26.06 (a FutureWarning: use type(get_current_device_resource())) and removed in
    26.08, so reachable only under install_as_rmm of an older rmm_version."""
    _warn_type_getter_deprecated(
        "get_current_device_resource_type is deprecated. Use type(get_current_device_resource()) instead.",
    )
    return type(get_current_device_resource())


def get_per_device_resource_type(device):
    """The class of `device`'s resource: RMM's get_per_device_resource_type, deprecated in 26.06
    (use type(get_per_device_resource(device))) and removed in 26.08, as the one above."""
    _warn_type_getter_deprecated(
        "get_per_device_resource_type is deprecated. Use type(get_per_device_resource(device)) instead.",
    )
    return type(get_per_device_resource(device))


# Public names of RMM releases before 26.08 that the newest has not. rmm.mr,
# rmm.pylibrmm.memory_resource and its _memory_resource module answer them (their __getattr__)
# only while install_as_rmm reports such a release; otherwise they are missing, as in RMM 26.08
# (AttributeError; ImportError for `from rmm.mr import ...`). Never in __all__: `import *` gives
# the newest release's names.
_REMOVED_NAMES = {
    "get_current_device_resource_type": get_current_device_resource_type,
    "get_per_device_resource_type": get_per_device_resource_type,
}
del get_current_device_resource_type, get_per_device_resource_type


def _removed_names_present():
    """The names of _REMOVED_NAMES the release install_as_rmm reports still has."""
    from ..._rmm_alias import type_getters_removed

    return () if type_getters_removed() else tuple(_REMOVED_NAMES)


def _removed_name(module, name):
    """`module`'s attribute `name` when it is one of _REMOVED_NAMES the reported release has;
    else the AttributeError of a missing attribute."""
    if name in _REMOVED_NAMES and name in _removed_names_present():
        return _REMOVED_NAMES[name]
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


def __getattr__(name):
    return _removed_name(__name__, name)


def __dir__():
    return sorted(set(globals()) | set(_removed_names_present()))


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
    device's resource. Every chain is built before any is set, so a failure changes nothing. A
    log file the device's present logging layer writes is shared by the new layer (one sink per
    file in a process). Should a file be refused as held (another process writes it, say) while
    the device's present layer writes it, every device gets its new chain first and that logging
    layer is made after; a device whose file still cannot be opened keeps its chain without
    logging (the first such error is raised after all are tried)."""
    from ..._reinitialize import _devices_arg, _log_file_for

    try:
        current_device()
    except CudaError as e:  # as RMM: no visible device (CUDA_VISIBLE_DEVICES="") warns, sets nothing
        if "cudaErrorNoDevice" in str(e):
            warnings.warn(str(e))
            return
        # another error: building the chains below reports it
    chains, held = [], set()
    for device in _devices_arg(devices):
        with _lib.device_context(device):
            mr = ManagedMemoryResource() if managed_memory else CudaMemoryResource()
            if pool_allocator:
                mr = PoolMemoryResource(mr, initial_pool_size=initial_pool_size, maximum_pool_size=maximum_pool_size)
            if logging:
                name = _log_file_for(log_file_name, device)
                try:
                    mr = LoggingResourceAdaptor(mr, log_file_name=log_file_name)
                except CrmmIOError:
                    if name not in _logging_files_of(_per_device.get(device)):
                        raise
                    held.add(device)  # its present resource writes the file: opened once it is gone
        chains.append((device, mr))
    for device, mr in chains:
        set_per_device_resource(device, mr)
    failed = None
    for device, mr in chains:  # every device has its new chain; now the logging layers held back
        if device not in held:
            continue
        try:
            with _lib.device_context(device):
                set_per_device_resource(device, LoggingResourceAdaptor(mr, log_file_name=log_file_name))
        except CrmmIOError as e:
            failed = failed or e
    if failed is not None:
        raise failed


def _logging_files_of(mr):
    """The files the logging layers of mr's chain write (none for None)."""
    files = []
    while mr is not None:
        if isinstance(mr, LoggingResourceAdaptor):
            files.append(mr.get_file_name())
        mr = mr._upstream_or_none()
    return files


def available_device_memory():
    """(free, total) bytes of the current device. Raises CudaError without a device."""
    free, total = ctypes.c_uint64(), ctypes.c_uint64()
    check(lib.crmm_cuda_device_memory(current_device(), ctypes.byref(free), ctypes.byref(total)))
    return free.value, total.value


def _flush_logs():
    """Write out the buffered lines of every logging layer under a device's resource: those
    set or recorded from Python (enable_logging's among them) and those libcrmm's switch
    (crmm_enable_logging) installed."""
    from ..logger import _switch_filenames

    seen = set()
    resources = list(_current_objects().values())
    for device in _switch_filenames():
        resources.append(get_per_device_resource(device))
    for mr in resources:
        layer = lib.crmm_resource_find_kind(mr._ptr, b"logging")
        if layer and layer not in seen:
            seen.add(layer)
            check(lib.crmm_resource_control(layer, _LOGGING_FLUSH, None))


def is_initialized():
    """True once crmm has loaded a config (on first use, or crmm.initialize). Under
    install_as_rmm always True, as RMM's: every device has a resource there (the config's,
    made on first use), so that RMM code such as `if not rmm.is_initialized():
    rmm.reinitialize(...)` keeps crmm's configured resource, as it keeps RMM's."""
    from ..._rmm_alias import is_installed_as_rmm

    return is_installed_as_rmm() or _lib.is_initialized()


from ..logger import disable_logging, enable_logging, get_log_filenames  # noqa: E402  (rmm.mr has them too)
