"""Loads libcrmm with ctypes and declares the C functions the package calls.

Where libcrmm is found, the first that loads and has every function below wins (a library that
lacks one, not libcrmm or an older one, is passed over and named in the ImportError):
  1. $CRMM_LIBRARY, a path (or a name the dynamic loader can find): only that is tried;
  2. the library `make install` put beside this package, named in _paths.py, which
     `make install` writes (not in the source tree);
  3. ctypes.util.find_library("crmm") (the loader's cache, LD_LIBRARY_PATH).
Only functions of libcrmm's public headers (include/crmm/) are used.
"""

import ctypes
import ctypes.util
import os
import threading

from ._errors import error_for

c_void_p, c_int, c_size_t, c_bool = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_bool
c_char_p, c_uint64, c_longlong, c_long = ctypes.c_char_p, ctypes.c_uint64, ctypes.c_longlong, ctypes.c_long


# The plugins' control ops and queries the package uses, by their C names. A control op is keyed
# by (kind, op): each plugin numbers its ops from 1 in plugins/<kind>/include/crmm/<kind>.h and
# the package reaches them with crmm_resource_control_kind. python/tests/test_stubs.py checks
# every value here against the headers.
OPS = {
    "CRMM_ASYNC_OP_GET_POOL": 1,
    "CRMM_ASYNC_MANAGED_OP_GET_POOL": 1,
    "CRMM_BINNING_OP_ADD_BIN": 1,
    "CRMM_CUDA_ASYNC_VIEW_OP_GET_POOL": 1,
    "CRMM_FAILURE_CALLBACK_OP_SET": 1,
    "CRMM_LOGGING_OP_FLUSH": 1,
    "CRMM_LOGGING_OP_GET_FILE": 2,
    "CRMM_POOL_OP_RESET_PEAKS": 2,
    "CRMM_STATISTICS_OP_GET": 1,
    "CRMM_STATISTICS_OP_PUSH": 2,
    "CRMM_STATISTICS_OP_POP": 3,
    "CRMM_TRACKING_OP_BYTES": 2,
    "CRMM_TRACKING_OP_STRING": 4,
    "CRMM_TRACKING_OP_LOG": 5,
}
# The plugins' own queries, numbered within their kind from CRMM_QUERY_PLUGIN_FIRST (1000): the
# kind is the name's third word (crmm_resource_query_kind asks the first layer of that kind).
QUERIES = {
    "CRMM_QUERY_POOL_DEVICE_SYNCS": 1000 + 0,
    "CRMM_QUERY_POOL_EVENT_WAITS": 1000 + 1,
    "CRMM_QUERY_POOL_GROWTHS": 1000 + 2,
    "CRMM_QUERY_POOL_PAGES_MAPPED": 1000 + 3,
    "CRMM_QUERY_POOL_PAGES_UNMAPPED": 1000 + 4,
    "CRMM_QUERY_POOL_PAGES_CREATED": 1000 + 5,
    "CRMM_QUERY_POOL_PAGES_RELEASED": 1000 + 6,
    "CRMM_QUERY_POOL_BLOCK_BYTES": 1000 + 7,
    "CRMM_QUERY_POOL_BLOCK_BYTES_PEAK": 1000 + 8,
    "CRMM_QUERY_POOL_THREAD_CACHES": 1000 + 9,
    "CRMM_QUERY_POOL_LOCK_WAITS": 1000 + 10,
    "CRMM_QUERY_POOL_PAGES_LENT": 1000 + 11,
    "CRMM_QUERY_POOL_PLAN_HITS": 1000 + 12,
    "CRMM_QUERY_POOL_PLAN_MISSES": 1000 + 13,
    "CRMM_QUERY_ASYNC_POOL_USED": 1000 + 0,
    "CRMM_QUERY_ASYNC_POOL_USED_PEAK": 1000 + 1,
}


class DeviceGuard(ctypes.Structure):
    """crmm_device_guard (crmm/cuda_support.h)."""

    _fields_ = [("previous", c_int), ("changed", c_int)]


class AllocCounters(ctypes.Structure):
    """crmm_alloc_counters (crmm/alloc_counters.h)."""

    _fields_ = [
        ("count", ctypes.c_int64),
        ("bytes", ctypes.c_int64),
        ("peak_count", ctypes.c_int64),
        ("peak_bytes", ctypes.c_int64),
        ("total_count", ctypes.c_uint64),
        ("total_bytes", ctypes.c_uint64),
    ]


FAILURE_CALLBACK = ctypes.CFUNCTYPE(c_bool, c_size_t, c_void_p)


def keep_forever(obj, kept, _incref=ctypes.pythonapi.Py_IncRef, _py_object=ctypes.py_object):
    """Keep `obj` (the ctypes trampolines a C resource calls) alive for the rest of the process,
    listed in `kept`: its Python owner is gone while the C resource lives on. Listing alone is not
    enough: at interpreter exit Python empties module globals, `kept` among them, before it frees
    the last objects that may still free memory through that resource (a device buffer held by
    __main__), and a freed trampoline called then crashes the process. One reference more than
    Python counts keeps it past that. Every argument is bound here, so that a __del__ running at
    exit can call it after the module's globals are gone."""
    kept.append(obj)
    _incref(_py_object(obj))


class FailureCallbackArgs(ctypes.Structure):
    """crmm_failure_callback_args (crmm/failure_callback.h)."""

    _fields_ = [("fn", FAILURE_CALLBACK), ("arg", c_void_p)]


class BinningBin(ctypes.Structure):
    """crmm_binning_bin (crmm/binning.h)."""

    _fields_ = [("size", ctypes.c_uint64), ("mr", c_void_p), ("added", ctypes.c_int)]


# name: (restype, argtypes)
_PROTOTYPES = {
    # error.h, crmm.h
    "crmm_version": (c_char_p, []),
    "crmm_last_error": (c_char_p, []),
    "crmm_last_status": (c_int, []),
    "crmm_clear_error": (None, []),
    # cuda_support.h
    "crmm_graph_capture_enable": (None, [c_bool]),
    "crmm_graph_capture_enabled": (c_bool, []),
    # graph_owner.h (the functions crmm/_torch_graph_hooks.so is given are passed as pointers)
    "crmm_graph_owner_adopted_total": (ctypes.c_uint64, []),
    # torch.h (the allocator functions themselves are PyTorch's to call)
    "crmm_torch_device_served": (c_bool, [c_int]),
    "crmm_torch_record_stream": (c_int, [c_void_p, c_void_p]),
    "crmm_torch_empty_cache": (c_int, []),
    "crmm_torch_set_memory_fraction": (c_int, [ctypes.c_double, c_int]),
    # config.h
    "crmm_init": (c_int, [c_char_p]),
    "crmm_current_config": (c_void_p, []),
    "crmm_config_default_file": (c_char_p, [c_char_p, c_size_t]),
    "crmm_config_load_file": (c_int, [c_char_p, ctypes.POINTER(c_void_p)]),
    "crmm_config_free": (None, [c_void_p]),
    "crmm_config_origin": (c_char_p, [c_void_p]),
    "crmm_config_resource_count": (c_size_t, [c_void_p]),
    "crmm_config_resource_name": (c_char_p, [c_void_p, c_size_t]),
    "crmm_config_resource_plugin": (c_char_p, [c_void_p, c_size_t]),
    "crmm_config_resource_upstream": (c_char_p, [c_void_p, c_size_t]),
    "crmm_config_default_resource": (c_char_p, [c_void_p, c_int]),
    "crmm_config_create_resource": (c_int, [c_void_p, c_char_p, c_int, ctypes.POINTER(c_void_p)]),
    "crmm_parse_size": (c_int, [c_char_p, c_uint64, ctypes.POINTER(c_uint64), ctypes.POINTER(ctypes.c_double)]),
    # resource.h
    "crmm_resource_create": (c_int, [c_char_p, c_char_p, c_void_p, ctypes.POINTER(c_void_p)]),
    "crmm_resource_allocate": (c_int, [c_void_p, c_size_t, c_void_p, ctypes.POINTER(c_void_p)]),
    "crmm_resource_deallocate": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p]),
    "crmm_resource_query": (c_int, [c_void_p, c_int, ctypes.POINTER(c_uint64)]),
    "crmm_resource_query_kind": (c_int, [c_void_p, c_char_p, c_int, ctypes.POINTER(c_uint64)]),
    "crmm_resource_trim": (c_int, [c_void_p]),
    "crmm_resource_control": (c_int, [c_void_p, c_int, c_void_p]),
    "crmm_resource_control_kind": (c_int, [c_void_p, c_char_p, c_int, c_void_p]),
    "crmm_resource_find_kind": (c_void_p, [c_void_p, c_char_p]),
    "crmm_resource_is_device_accessible": (c_bool, [c_void_p]),
    "crmm_resource_is_host_accessible": (c_bool, [c_void_p]),
    "crmm_resource_kind": (c_char_p, [c_void_p]),
    "crmm_resource_name": (c_char_p, [c_void_p]),
    "crmm_resource_upstream": (c_void_p, [c_void_p]),
    "crmm_resource_retain": (c_void_p, [c_void_p]),
    "crmm_resource_release": (None, [c_void_p]),
    "crmm_resource_refcount": (c_long, [c_void_p]),
    "crmm_get_current_device_resource_ref": (c_void_p, []),
    "crmm_get_per_device_resource_ref": (c_void_p, [c_int]),
    "crmm_set_current_device_resource": (c_void_p, [c_void_p]),
    "crmm_set_per_device_resource": (c_void_p, [c_int, c_void_p]),
    # cuda_support.h
    "crmm_cuda_device_count": (c_int, [ctypes.POINTER(c_int)]),
    "crmm_cuda_current_device": (c_int, [ctypes.POINTER(c_int)]),
    "crmm_cuda_device_memory": (c_int, [c_int, ctypes.POINTER(c_uint64), ctypes.POINTER(c_uint64)]),
    "crmm_cuda_device_enter": (c_int, [c_int, ctypes.POINTER(DeviceGuard)]),
    "crmm_cuda_device_restore": (None, [ctypes.POINTER(DeviceGuard)]),
    # stream.h, stream_pool.h
    "crmm_stream_create": (c_int, [c_int, ctypes.POINTER(c_void_p)]),
    "crmm_stream_view": (c_int, [c_void_p, ctypes.POINTER(c_void_p)]),
    "crmm_stream_destroy": (None, [c_void_p]),
    "crmm_stream_default": (c_void_p, []),
    "crmm_stream_per_thread": (c_void_p, []),
    "crmm_stream_handle": (c_void_p, [c_void_p]),
    "crmm_stream_is_default": (c_bool, [c_void_p]),
    "crmm_stream_synchronize": (c_int, [c_void_p]),
    "crmm_stream_pool_create": (c_int, [c_size_t, c_int, ctypes.POINTER(c_void_p)]),
    "crmm_stream_pool_destroy": (None, [c_void_p]),
    "crmm_stream_pool_get_pool_size": (c_size_t, [c_void_p]),
    "crmm_stream_pool_get_stream": (c_int, [c_void_p, ctypes.POINTER(c_void_p)]),
    "crmm_stream_pool_get_stream_by_id": (c_int, [c_void_p, c_longlong, ctypes.POINTER(c_void_p)]),
    # device_buffer.h
    "crmm_copy_device_to_ptr": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p]),
    "crmm_copy_host_to_ptr": (c_int, [c_void_p, c_size_t, c_void_p, c_void_p]),
    "crmm_copy_ptr_to_host": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p]),
    "crmm_device_buffer_create": (c_int, [c_size_t, c_void_p, c_void_p, ctypes.POINTER(c_void_p)]),
    "crmm_device_buffer_to_device": (c_int, [c_void_p, c_size_t, c_void_p, c_void_p, ctypes.POINTER(c_void_p)]),
    "crmm_device_buffer_destroy": (None, [c_void_p]),
    "crmm_device_buffer_ptr": (c_void_p, [c_void_p]),
    "crmm_device_buffer_size": (c_size_t, [c_void_p]),
    "crmm_device_buffer_capacity": (c_size_t, [c_void_p]),
    "crmm_device_buffer_device": (c_int, [c_void_p]),
    "crmm_device_buffer_resource": (c_void_p, [c_void_p]),
    "crmm_device_buffer_copy_to_host": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p]),
    "crmm_device_buffer_copy_from_host": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p]),
    "crmm_device_buffer_copy_from_device": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p]),
    "crmm_device_buffer_resize": (c_int, [c_void_p, c_size_t, c_void_p]),
    "crmm_device_buffer_reserve": (c_int, [c_void_p, c_size_t, c_void_p]),
    "crmm_device_buffer_shrink_to_fit": (c_int, [c_void_p, c_void_p]),
    # log.h, logging.h
    "crmm_log_set_level": (c_int, [c_int]),
    "crmm_log_get_level": (c_int, []),
    "crmm_log_should_log": (c_bool, [c_int]),
    "crmm_log_flush_on": (c_int, [c_int]),
    "crmm_log_get_flush_level": (c_int, []),
    "crmm_log_flush": (None, []),
    "crmm_disable_logging": (c_int, []),
    "crmm_get_log_filenames": (c_int, [ctypes.POINTER(c_char_p), c_int, ctypes.POINTER(c_int)]),
}


def _candidates():
    explicit = os.environ.get("CRMM_LIBRARY")
    if explicit:
        return [explicit]
    found = []
    try:
        from . import _paths
    except ImportError:
        _paths = None
    if _paths is not None:
        found.append(os.path.join(_paths.LIBDIR, _paths.LIBRARY))
    name = ctypes.util.find_library("crmm")
    if name:
        found.append(name)
    return found


def _load():
    tried = []
    for candidate in _candidates():
        try:
            loaded = ctypes.CDLL(candidate)
        except OSError as e:
            tried.append(f"{candidate}: {e}")
            continue
        missing = [name for name in _PROTOTYPES if not hasattr(loaded, name)]
        if not missing:
            return loaded, candidate
        # another library, or an older libcrmm: the next candidate may be the right one
        tried.append(f"{candidate}: loads, but has no {missing[0]}"
                     f"{f' (nor {len(missing) - 1} more functions)' if len(missing) > 1 else ''}: "
                     "not libcrmm, or one older than this package")
    where = "; ".join(tried) if tried else "no libcrmm installed beside this package or known to the loader"
    raise ImportError(
        f"crmm cannot load libcrmm ({where}). Install crmm (make install), or set CRMM_LIBRARY to the "
        "path of libcrmm.so"
    )


lib, library_path = _load()
for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes
del _name, _restype, _argtypes, _fn


def _cuda_function(name, restype, argtypes):
    """A CUDA runtime function of the runtime libcrmm itself uses (found through libcrmm's
    dependencies, so it shares libcrmm's view of the current device), or None."""
    try:
        fn = getattr(lib, name)
    except AttributeError:
        return None
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


cuda_memset_async = _cuda_function("cudaMemsetAsync", c_int, [c_void_p, c_int, c_size_t, c_void_p])
cuda_get_error_string = _cuda_function("cudaGetErrorString", c_char_p, [c_int])
cuda_get_last_error = _cuda_function("cudaGetLastError", c_int, [])
cuda_runtime_get_version = _cuda_function("cudaRuntimeGetVersion", c_int, [ctypes.POINTER(c_int)])


class CudaMemLocation(ctypes.Structure):
    """cudaMemLocation (CUDA 12.2 and later): a device is type 1 with its ordinal as id, the
    host type 2 (its id unused)."""

    _fields_ = [("type", c_int), ("id", c_int)]


CUDA_CPU_DEVICE_ID = -1  # cudaCpuDeviceId: the host, where a device ordinal is asked for


def _mem_location(device):
    """The cudaMemLocation of a device ordinal, or of the host for cudaCpuDeviceId (a device
    location of -1 is invalid, which prefetch would take for memory that is not managed)."""
    return CudaMemLocation(2, 0) if device == CUDA_CPU_DEVICE_ID else CudaMemLocation(1, device)


def _mem_prefetch():
    """cudaMemPrefetchAsync as a function of (ptr, nbytes, device, stream handle) -> cudaError,
    device an ordinal or cudaCpuDeviceId (-1, the host, as RMM takes it), over the runtime's
    signature: a cudaMemLocation and flags from CUDA 13, a device before."""
    fn = _cuda_function("cudaMemPrefetchAsync", c_int, [])
    if fn is None or cuda_runtime_get_version is None:
        return None
    version = c_int(0)
    if cuda_runtime_get_version(ctypes.byref(version)) != 0:
        return None
    if version.value >= 13000:
        fn.argtypes = [c_void_p, c_size_t, CudaMemLocation, ctypes.c_uint, c_void_p]
        return lambda ptr, n, device, stream: fn(ptr, n, _mem_location(device), 0, stream)
    fn.argtypes = [c_void_p, c_size_t, c_int, c_void_p]
    return lambda ptr, n, device, stream: fn(ptr, n, device, stream)


cuda_mem_prefetch = _mem_prefetch()


def text(value):
    """A C string from libcrmm as str ('' for NULL)."""
    return value.decode("utf-8", "replace") if value else ""


def last_error():
    return text(lib.crmm_last_error())


# An exception a Python callback raised inside a libcrmm call (CallbackMemoryResource's
# allocate function), per thread: C cannot carry it, so the callback leaves it here and returns
# failure, and check() raises it when the call comes back failed.
_callback_errors = threading.local()
callback_errors_stashed = 0  # ever, in any thread: while 0, drop_stale_callback_error costs one load


def stash_callback_error(exc):
    """Keep `exc`, raised by a Python callback that C called, for the failing call's check()
    on this thread. The last one wins, as in RMM, where the last exception thrown is the one
    that reaches Python (a failure callback's over the allocate function's)."""
    global callback_errors_stashed
    callback_errors_stashed += 1
    _callback_errors.error = exc


def take_callback_error():
    """The exception stashed on this thread, or None; clears it."""
    exc = getattr(_callback_errors, "error", None)
    _callback_errors.error = None
    return exc


def drop_stale_callback_error():
    """Before a call that may run Python callbacks: an exception stashed during an earlier call
    that C recovered from (a pool that halved its growth after a failure callback raised, and
    succeeded) is not this call's failure."""
    if callback_errors_stashed:
        _callback_errors.error = None


def _callback_exception(exc):
    """What a failed call raises for a callback's exception, as RMM does: a MemoryError or a
    RuntimeError as it is, KeyboardInterrupt and SystemExit as they are, any other one as a
    RuntimeError with its message."""
    if isinstance(exc, (MemoryError, RuntimeError, KeyboardInterrupt, SystemExit)):
        return exc
    wrapped = RuntimeError(str(exc))
    wrapped.__cause__ = exc
    return wrapped


def check(status):
    """Raise the exception for a failed call (status != CRMM_OK): the exception of a Python
    callback that made it fail, else the one of libcrmm's status and message."""
    if status != 0:
        pending = take_callback_error()
        if pending is not None:
            raise _callback_exception(pending)
        raise error_for(status, last_error())
    if callback_errors_stashed:  # the call succeeded: a callback's exception inside it was recovered from
        _callback_errors.error = None


def raise_last(fallback="libcrmm call failed"):
    """Raise the exception for the calling thread's last error (for calls that return NULL)."""
    status = lib.crmm_last_status()
    raise error_for(status or 4, last_error() or fallback)


_init_lock = threading.Lock()

# True once libcrmm has a config (crmm_init ran): lets the allocation path skip the C query.
# The package never calls crmm_finalize, so it stays true.
initialized = False


def _init_locked(path):
    global initialized
    from ._host import path_arg

    status = lib.crmm_init(path_arg(path, "path") if path is not None else None)
    if status == 0:
        initialized = True
        return
    msg = last_error()
    buf = ctypes.create_string_buffer(4096)
    default = text(lib.crmm_config_default_file(buf, len(buf)))
    where = path if path is not None else (default or "the built-in default")
    err = error_for(status, msg)
    raise type(err)(
        f"{msg} (the config is {where}; `crmm check-config FILE` shows what is wrong; "
        "$CRMM_CONFIG names the file crmm loads)",
        err.status,
    )


def initialize(path=None):
    """crmm_init(path): load the config (None: $CRMM_CONFIG, the installed one, or built-in)."""
    with _init_lock:
        _init_locked(path)


def ensure_initialized():
    """Initialise libcrmm with the default config unless the process did already."""
    global initialized
    if lib.crmm_current_config():
        initialized = True
        return
    with _init_lock:
        if not lib.crmm_current_config():
            _init_locked(None)
        initialized = True


def is_initialized():
    return bool(lib.crmm_current_config())


def device_count():
    """Number of CUDA devices (0 when there is none or CUDA cannot be used)."""
    n = c_int(0)
    status = lib.crmm_cuda_device_count(ctypes.byref(n))
    lib.crmm_clear_error()
    return n.value if status == 0 else 0


class device_context:
    """`with device_context(d):` makes device d current (nothing for d < 0), then restores."""

    def __init__(self, device):
        self.device = device
        self.guard = DeviceGuard(-1, 0)

    def __enter__(self):
        check(lib.crmm_cuda_device_enter(self.device, ctypes.byref(self.guard)))
        return self

    def __exit__(self, *exc):
        lib.crmm_cuda_device_restore(ctypes.byref(self.guard))
        return False

