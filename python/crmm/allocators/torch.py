"""PyTorch allocator: ``crmm.allocators.torch.use_crmm()`` makes every CUDA tensor's memory come
from the current crmm resource of its device, through torch's CUDAPluggableAllocator over
libcrmm's crmm_torch_allocate / crmm_torch_deallocate. Call it before torch first allocates CUDA
memory (torch refuses to change its allocator afterwards).

PyTorch keeps no figures of its own under a pluggable allocator (torch 2.11's
torch.cuda.memory_allocated() and memory_stats() raise RuntimeError: "CUDAPluggableAllocator does
not yet support getDeviceStats", and torch.cuda.empty_cache() does nothing): memory_stats() here
gives them from crmm's resource, under torch's key names, and reset_peak_memory_stats() resets
its peaks. use_crmm() also routes torch.cuda's own functions (memory_stats(),
memory_allocated(), max_memory_reserved(), reset_peak_memory_stats(), memory_summary(),
empty_cache(), set_per_process_memory_fraction(), ...) to these figures, to crmm's trim and to
crmm's limit on what a device's resource holds; where crmm's hooks library is built, a failed
allocation raises torch.OutOfMemoryError as under PyTorch's own allocator.

The module imports without PyTorch: rmm_torch_allocator is then None (as in RMM) and use_crmm()
raises ModuleNotFoundError naming torch."""

import ctypes
import os
import warnings

from .._errors import UnsupportedError
from .. import _lib
from .._after_import import after_import
from .._host import bool_arg
from .._lib import check, lib, library_path

try:
    from torch.cuda.memory import CUDAPluggableAllocator, change_current_allocator
except ImportError:
    CUDAPluggableAllocator = change_current_allocator = None

__all__ = [
    "rmm_torch_allocator",
    "crmm_torch_allocator",
    "use_crmm",
    "crmm_mem_pool",
    "graph_hooks_installed",
    "record_stream_installed",
    "memory_stats",
    "reset_peak_memory_stats",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
]

_allocator = None  # the allocator object, made at its first use (_pluggable_allocator)
_null_allocator = None  # one over libcrmm's functions (_libcrmm_allocator)


def _libcrmm_allocator():
    """A pluggable allocator over libcrmm's crmm_torch_allocate and _deallocate, made once: a failed
    allocation is NULL to PyTorch. What torch.cuda.MemPool needs (its cache treats NULL as out of
    memory: it frees its cached blocks, tries again, then raises), and the allocator object where
    the hooks library is missing."""
    global _null_allocator
    if _null_allocator is None:
        _null_allocator = CUDAPluggableAllocator(library_path, "crmm_torch_allocate", "crmm_torch_deallocate")
    return _null_allocator


def _pluggable_allocator(hooks):
    """The allocator object, as RMM's rmm_torch_allocator (None without torch), made once: over
    the allocation functions of `hooks` (the loaded hooks library, or None) when it takes libcrmm's
    (crmm_torch_install_allocator), so that a failed allocation raises in PyTorch
    (torch.OutOfMemoryError when memory ran out) as PyTorch's own allocator does; else over
    libcrmm's crmm_torch_allocate, whose failures PyTorch gets as NULL (a CUDA error later, crmm's
    message on stderr before it)."""
    global _allocator
    if _allocator is None and CUDAPluggableAllocator is not None:
        why = None if hooks is None else _hooks_install(
            hooks, "crmm_torch_install_allocator", ("crmm_torch_allocate_checked", "crmm_torch_deallocate",
                                                    "crmm_last_error"))
        if hooks is not None and why is None:
            _allocator = CUDAPluggableAllocator(hooks._name, "crmm_torch_hooks_allocate", "crmm_torch_hooks_deallocate")
        else:
            if why is not None:
                warnings.warn(f"crmm's failed allocations will reach PyTorch as NULL, not as exceptions: {why}",
                              RuntimeWarning, stacklevel=3)
            _allocator = _libcrmm_allocator()
    return _allocator


def __getattr__(name):
    # rmm_torch_allocator (and crmm_torch_allocator): made when first asked for, since loading the
    # hooks library needs torch's libraries, which a program that only imports crmm never loads
    if name in ("rmm_torch_allocator", "crmm_torch_allocator"):
        if _allocator is None and CUDAPluggableAllocator is not None:
            return _pluggable_allocator(_load_graph_hooks())
        return _allocator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def use_crmm(inductor_cudagraph_trees=False):
    """Switch PyTorch to crmm. Raises ModuleNotFoundError without PyTorch, RuntimeError (from
    torch) when torch has already allocated CUDA memory with its own allocator.

    torch.compile's CUDA graph trees (mode="reduce-overhead") read and checkpoint the private
    state of PyTorch's own caching allocator, which torch's pluggable-allocator interface does not
    expose (they fail with "pluggable does not yet support checkPoolLiveAllocations"); so this
    turns them off (``torch._inductor.config.triton.cudagraph_trees = False``) and inductor
    captures each compiled graph with torch.cuda.graph, which crmm serves. The setting is made
    when inductor's config is first imported (now, if it is already), so that a program that
    never compiles does not pay inductor's import. Pass ``inductor_cudagraph_trees=True`` to
    leave inductor's setting alone; anything but True or False raises TypeError, before torch
    is looked for.

    torch.cuda's memory functions then answer from crmm (memory_allocated(), memory_stats(),
    memory_summary(), reset_peak_memory_stats(), empty_cache(); see
    _route_torch_memory_functions).

    Where crmm's hooks for PyTorch's CUDA graph pools are built (C++, needs PyTorch's headers at
    build time), this also installs them, so that the graphs torch captures carry no CUDA user
    object of crmm's (graph_hooks_installed() says whether it did; $CRMM_TORCH_HOOKS: the
    library's path, or "off"), and passes tensor.record_stream on to crmm
    (record_stream_installed())."""
    bool_arg(inductor_cudagraph_trees, "inductor_cudagraph_trees")
    if change_current_allocator is None:
        raise ModuleNotFoundError("No module named 'torch': use_crmm needs PyTorch", name="torch")
    hooks = _load_graph_hooks()  # a bad $CRMM_TORCH_HOOKS fails before torch's allocator changes
    change_current_allocator(_pluggable_allocator(hooks))
    import torch

    _route_torch_memory_functions(torch._C)
    if not inductor_cudagraph_trees:
        after_import("torch._inductor.config", _no_cudagraph_trees)
    if hooks is not None:
        _install_graph_hooks(hooks)


_graph_hooks_installed = False


def graph_hooks_installed():
    """Whether use_crmm() installed crmm's hooks for PyTorch's CUDA graph pools: then crmm learns
    from PyTorch when a captured graph is gone (docs/cuda-graphs.md) and ties no CUDA user object
    to it, which would cost each replay a little device time. False where the hooks are not built
    (they need PyTorch's C++ headers at build time) or $CRMM_TORCH_HOOKS is "off"."""
    return _graph_hooks_installed


def _graph_hooks_library():
    """The path of crmm/_torch_graph_hooks.so to load, or None: $CRMM_TORCH_HOOKS when set ("off":
    none; ``make check`` points it at the build tree's), else the one installed beside this
    package, if any. A path in $CRMM_TORCH_HOOKS that does not exist raises FileNotFoundError."""
    where = os.environ.get("CRMM_TORCH_HOOKS", "")
    if where == "off":
        return None
    if where:
        if not os.path.isfile(where):
            raise FileNotFoundError(f"$CRMM_TORCH_HOOKS={where} does not exist (unset it, or set it to off)")
        return where
    installed = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_torch_graph_hooks.so")
    return installed if os.path.isfile(installed) else None


def _load_graph_hooks():
    """The hooks library (_graph_hooks_library()) loaded, or None. One that cannot be loaded (built
    against another torch, say) raises ImportError when $CRMM_TORCH_HOOKS named it; the one
    installed beside the package is then left out with a warning (captures keep their user
    objects: slower replays, nothing lost)."""
    path = _graph_hooks_library()
    if path is None:
        return None
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        message = (f"crmm's hooks for PyTorch's graph pools ({path}) cannot be loaded: {e} "
                   "(rebuild crmm against this torch, or set CRMM_TORCH_HOOKS=off)")
        if os.environ.get("CRMM_TORCH_HOOKS"):
            raise ImportError(message) from None
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        return None


def _hooks_install(hooks, entry, functions):
    """Call the hooks library's `entry` with the addresses of libcrmm's `functions`, then a
    message buffer and its size, as each of its entry points takes them. None when it installed,
    else why not (its message, or the missing entry point or function)."""
    message = ctypes.create_string_buffer(512)
    try:
        install = getattr(hooks, entry)
        install.restype = ctypes.c_int
        install.argtypes = [ctypes.c_void_p] * len(functions) + [ctypes.c_char_p, ctypes.c_size_t]
        pointers = [ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in functions]
        if install(*pointers, message, len(message)) == 0:
            return None
        return message.value.decode(errors="replace")
    except AttributeError as e:
        return str(e)


def _install_graph_hooks(hooks):
    """Set the loaded hooks library's hooks on torch's current (crmm's) allocator, then its
    record_stream function (_install_record_stream). Torch's allocator is crmm's already: a
    library that refuses (or lacks its entry point) is left out with a RuntimeWarning, and
    captures keep their user objects."""
    global _graph_hooks_installed
    why = _hooks_install(hooks, "crmm_torch_install_graph_hooks",
                         ("crmm_graph_owner_begin", "crmm_graph_owner_end", "crmm_graph_owner_release"))
    if why is not None:
        warnings.warn(f"crmm's hooks for PyTorch's graph pools are not installed: {why}", RuntimeWarning,
                      stacklevel=3)
        return
    _graph_hooks_installed = True
    _install_record_stream(hooks)


_record_stream_installed = False


def record_stream_installed():
    """Whether use_crmm() passed tensor.record_stream(s) on to crmm (crmm_torch_record_stream:
    the free of such a tensor's memory first makes its stream wait for s's work). It needs crmm's
    hooks library, as graph_hooks_installed() does; without it record_stream does nothing under
    crmm, as under any pluggable allocator, and memory a tensor used on another stream must be
    freed after that stream is waited for."""
    return _record_stream_installed


def _install_record_stream(hooks):
    """Set the hooks library's record_stream function on torch's current (crmm's) allocator; a
    library without it, or one that refuses, is left out with a RuntimeWarning."""
    global _record_stream_installed
    why = _hooks_install(hooks, "crmm_torch_install_record_stream", ("crmm_torch_record_stream", "crmm_last_error"))
    if why is not None:
        warnings.warn(f"tensor.record_stream is not passed on to crmm: {why}", RuntimeWarning, stacklevel=4)
        return
    _record_stream_installed = True


def _no_cudagraph_trees(inductor_config):
    inductor_config.triton.cudagraph_trees = False


def crmm_mem_pool(**kwargs):
    """A ``torch.cuda.MemPool`` whose segments come from crmm (the current resource of the
    device), for ``torch.cuda.use_mem_pool(pool)`` and ``torch.cuda.graph(g, pool=pool.id)``:
    PyTorch caches blocks inside the pool, crmm gives it its memory. Needs no ``use_crmm()``.
    Keyword arguments go to ``torch.cuda.MemPool`` (e.g. ``use_on_oom``)."""
    import torch

    return torch.cuda.MemPool(_libcrmm_allocator().allocator(), **kwargs)


# torch.cuda.memory_stats() keys and the crmm queries that mean the same, current and peak. A
# pool's blocks are requests rounded up to 256 bytes, as torch's blocks are rounded up to 512:
# "allocated" is the blocks, "requested" what was asked for. A freed block is free at once for
# its stream (crmm orders other streams itself), so "active" is "allocated".
_STATS = (
    ("allocated_bytes.all", "pool_block_bytes", "pool_block_bytes_peak"),
    ("active_bytes.all", "pool_block_bytes", "pool_block_bytes_peak"),
    ("requested_bytes.all", "bytes_in_use", "bytes_in_use_peak"),
    ("reserved_bytes.all", "bytes_reserved", "bytes_reserved_peak"),
    ("allocation.all", "allocations", "allocations_peak"),
    ("active.all", "allocations", "allocations_peak"),
)
# What the pool asked of the device since it was made (crmm's own, under a "crmm." prefix).
_COUNTERS = ("device_syncs", "event_waits", "growths", "pages_mapped", "pages_unmapped", "pages_created",
             "pages_released", "thread_caches", "lock_waits", "pages_lent", "plan_hits", "plan_misses")


def _device_index(device):
    """int from None (the current device), an int, "cuda", "cuda:N" or a torch.device."""
    if device is None:
        from ..pylibrmm.memory_resource import current_device

        return current_device()
    if isinstance(device, bool):
        raise TypeError("device must be an int, 'cuda:N' or a torch.device, not bool")
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)
    if getattr(device, "type", None) == "cuda":
        return _device_index(index)
    if isinstance(device, str) and (device == "cuda" or device.startswith("cuda:")):
        if device == "cuda":
            return _device_index(None)
        try:
            index = int(device[5:])
        except ValueError:
            raise ValueError(f"device must be 'cuda' or 'cuda:N' (N a device number), not {device!r}") from None
        return _device_index(index)
    raise TypeError(f"device must be an int, 'cuda:N' or a torch.device, not {device!r}")


def _resource(device, mr):
    """`mr` when given (TypeError when it is not a MemoryResource), else `device`'s resource."""
    if mr is not None:
        from ..pylibrmm.memory_resource import _mr_arg

        return _mr_arg(mr)
    from ..pylibrmm.memory_resource import get_per_device_resource

    return get_per_device_resource(_device_index(device))


def _query(mr, what, kind=None):
    """mr.query(what), or with `kind` a core figure (bytes_in_use, ...) of the chain's first
    layer of that kind; None when it cannot tell."""
    from ..pylibrmm.memory_resource._memory_resource import QUERIES

    code = QUERIES[what]
    if kind is None or type(code) is not int:  # the plugin's own figures name their kind already
        try:
            return mr.query(what)
        except UnsupportedError:
            return None
    out = ctypes.c_uint64()
    if lib.crmm_resource_query_kind(mr._handle, kind.encode(), code, ctypes.byref(out)) != 0:
        lib.crmm_clear_error()
        return None
    return out.value


# Adaptors that hand every allocation to their upstream as it is, one for one.
_PASS_THROUGH = frozenset({"statistics", "tracking", "logging", "failure_callback", "limiting", "prefetch"})


def _passes_through_to_pool(mr):
    while mr is not None and mr.kind != "pool":
        if mr.kind not in _PASS_THROUGH:
            return False
        mr = mr._upstream_or_none()
    return mr is not None


def memory_stats(device=None, mr=None):
    """PyTorch's memory statistics of crmm's resource for `device` (None: the current device;
    an int, "cuda:N" or torch.device), or of resource `mr`: a dict under torch.cuda.memory_stats()
    names where they mean the same ("allocated_bytes.all.current", "reserved_bytes.all.peak",
    ...), and "crmm.device_syncs", "crmm.pages_unmapped", ... for what a pool asked of the device.
    Figures the resource cannot give are left out (a resource without counters gives {}).
    Raises TypeError when `mr` is not a crmm MemoryResource or `device` is not a device."""
    mr = _resource(device, mr)
    stats = {}
    # every figure from the chain's first pool when only adaptors that pass each call through lie
    # above it (reset_peak_memory_stats resets the pool; statistics above it keeps peaks of its
    # own), else from the top: a binning over a pool serves some requests from other bins
    layer = "pool" if _query(mr, "pool_block_bytes") is not None and _passes_through_to_pool(mr) else None
    for key, current, peak in _STATS:
        now = _query(mr, current, layer) if layer is not None or current != "pool_block_bytes" else None
        if now is None and current == "pool_block_bytes":
            # no pool, or one that serves only part of the requests (a binning's other bins hold
            # the rest, which its blocks leave out): the requested bytes
            current, peak = "bytes_in_use", "bytes_in_use_peak"
            now = _query(mr, current)
        if now is None:
            continue
        stats[key + ".current"] = now
        high = _query(mr, peak, layer)
        if high is not None:
            stats[key + ".peak"] = high
    for name in _COUNTERS:
        v = _query(mr, "pool_" + name)
        if v is not None:
            stats["crmm." + name] = v
    return dict(sorted(stats.items()))


_POOL_OP_RESET_PEAKS = _lib.OPS["CRMM_POOL_OP_RESET_PEAKS"]


def reset_peak_memory_stats(device=None, mr=None):
    """Set the peaks of memory_stats() to the current figures (torch.cuda.reset_peak_memory_stats)
    on the first pool of the resource's chain. Raises UnsupportedError when the chain has no
    pool, or when memory_stats() reads its figures from a layer above the pool (a binning, say),
    whose peaks it cannot reset; TypeError when `mr` is not a crmm MemoryResource or `device` is
    not a device."""
    mr = _resource(device, mr)
    if not _passes_through_to_pool(mr) and _query(mr, "pool_block_bytes") is not None:
        # resetting the pool alone would leave every peak memory_stats() reports as it was
        raise UnsupportedError(
            f"reset_peak_memory_stats: the figures of this {mr.kind} resource are its own, not its pool's "
            "(a layer between them serves requests itself), and their peaks cannot be reset",
            "CRMM_ERROR_UNSUPPORTED")
    check(lib.crmm_resource_control_kind(mr._handle, b"pool", _POOL_OP_RESET_PEAKS, ctypes.c_void_p()))


def memory_allocated(device=None, mr=None):
    """Bytes of the blocks handed out (torch.cuda.memory_allocated)."""
    return memory_stats(device, mr).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None, mr=None):
    """The peak of memory_allocated() (torch.cuda.max_memory_allocated)."""
    return memory_stats(device, mr).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None, mr=None):
    """Bytes the resource holds from the device (torch.cuda.memory_reserved)."""
    return memory_stats(device, mr).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None, mr=None):
    """The peak of memory_reserved() (torch.cuda.max_memory_reserved)."""
    return memory_stats(device, mr).get("reserved_bytes.all.peak", 0)


# ---- torch's own memory functions under crmm ------------------------------------------------------

# What torch._C._cuda_memoryStats returns for PyTorch's allocator: these metrics, each for these
# pools, each with these fields; then event counts. torch.cuda.memory_summary() reads every one.
_TORCH_METRICS = ("allocated_bytes", "active_bytes", "requested_bytes", "reserved_bytes", "inactive_split_bytes",
                  "allocation", "active", "segment", "inactive_split")
_TORCH_POOLS = ("all", "large_pool", "small_pool")
_TORCH_FIELDS = ("current", "peak", "allocated", "freed")
_TORCH_COUNTS = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free")
# crmm's pool counters that mean what torch's event counts mean
_TORCH_COUNTS_FROM = {"num_sync_all_streams": "crmm.device_syncs", "num_device_alloc": "crmm.pages_mapped",
                      "num_device_free": "crmm.pages_unmapped"}


def _torch_memory_stats_nested(device=None):
    """crmm's figures for `device` in the nested form of torch._C._cuda_memoryStats, which
    torch.cuda.memory_stats() flattens: every key torch's own functions read, memory_summary()'s
    included. The figures memory_stats() gives fill the "all" pool; what crmm does not keep (the
    large and small pools, the accumulated "allocated" and "freed" fields, segments, splits,
    retries, out-of-memory counts) is 0, as under PyTorch's cudaMallocAsync backend; a pool's
    device synchronizations and pages mapped and unmapped fill num_sync_all_streams,
    num_device_alloc and num_device_free, and its own counters stay under "crmm". A device PyTorch
    has not allocated on through crmm reads 0 everywhere, and no resource is made for it."""
    index = _device_index(device)
    flat = memory_stats(index) if lib.crmm_torch_device_served(index) else {}
    nested = {m: {p: {f: flat.get(f"{m}.{p}.{f}", 0) for f in _TORCH_FIELDS} for p in _TORCH_POOLS}
              for m in _TORCH_METRICS}
    nested.update({c: flat.get(_TORCH_COUNTS_FROM.get(c, ""), 0) for c in _TORCH_COUNTS})
    nested["oversize_allocations"] = {f: 0 for f in _TORCH_FIELDS}
    nested["oversize_segments"] = {f: 0 for f in _TORCH_FIELDS}
    nested["max_split_size"] = -1  # crmm splits blocks of every size
    own = {k[len("crmm."):]: v for k, v in flat.items() if k.startswith("crmm.")}
    if own:
        nested["crmm"] = own
    return nested


_peaks_warned = False


def _torch_reset_peaks(device=None):
    """torch.cuda.reset_peak_memory_stats(device) under crmm: reset_peak_memory_stats(device) for a
    device PyTorch allocated on. A resource whose peaks cannot be reset (no pool in its chain, or
    a layer above it keeping figures of its own) gets one RuntimeWarning per process and keeps its
    peaks, so that a training loop resetting them every step keeps running."""
    global _peaks_warned
    index = _device_index(device)
    if not lib.crmm_torch_device_served(index):
        return
    try:
        reset_peak_memory_stats(index)
    except UnsupportedError as e:
        if not _peaks_warned:
            _peaks_warned = True
            warnings.warn(f"torch.cuda.reset_peak_memory_stats has no effect under crmm here: {e}", RuntimeWarning,
                          stacklevel=3)


def _torch_reset_accumulated(device=None):
    """torch.cuda.reset_accumulated_memory_stats(device) under crmm: the accumulated figures
    _torch_memory_stats_nested() gives are all 0, so there is nothing to reset."""
    _device_index(device)


def _torch_empty_cache(*_pool):
    """torch.cuda.empty_cache() under crmm: trim the resource of every device PyTorch allocated
    on (crmm_torch_empty_cache), giving its free memory back to the device (a torch that names
    a memory pool gets the same: crmm's trim is per device). Raises CrmmError (CudaError, ...)
    when a trim fails; every such device is still tried."""
    check(lib.crmm_torch_empty_cache())


_fraction_warned = False


def _torch_set_memory_fraction(fraction, device=None):
    """torch.cuda.set_per_process_memory_fraction(fraction, device) under crmm
    (crmm_torch_set_memory_fraction): from now on an allocation that would leave the device's
    resource holding more than fraction × the device's memory fails as out of memory, after crmm
    gave its free memory back, as under PyTorch's own allocator. A resource that does not say what
    it holds cannot be bounded so: that gets one RuntimeWarning per process, naming the way
    (maximum_size on the config's pool); a fraction outside [0, 1] raises InvalidArgumentError."""
    global _fraction_warned
    try:
        check(lib.crmm_torch_set_memory_fraction(float(fraction), _device_index(device)))
    except UnsupportedError as e:
        if not _fraction_warned:
            _fraction_warned = True
            warnings.warn(f"torch.cuda.set_per_process_memory_fraction({fraction}) has no effect under crmm here: {e}",
                          RuntimeWarning, stacklevel=3)


# torch._C's functions behind torch.cuda's memory functions, which raise (or do nothing) under a
# pluggable allocator, and what answers them under crmm. torch.accelerator's memory functions are
# not routed: they go by torch's own CUDA allocator, which a pluggable allocator leaves unused, so
# routing the torch._C functions behind them does not reach them (bench/RESULTS.md).
_TORCH_ROUTES = {
    "_cuda_setMemoryFraction": _torch_set_memory_fraction,
    "_cuda_memoryStats": _torch_memory_stats_nested,
    "_cuda_resetPeakMemoryStats": _torch_reset_peaks,
    "_cuda_resetAccumulatedMemoryStats": _torch_reset_accumulated,
    "_cuda_emptyCache": _torch_empty_cache,
}


def _route_torch_memory_functions(torch_c):
    """Point the functions of _TORCH_ROUTES that `torch_c` (torch._C) has at crmm's. torch.cuda's
    Python functions look them up in torch._C at every call, so torch.cuda.memory_allocated(),
    memory_summary(), empty_cache() and the rest answer from crmm from now on; a torch without one
    of them keeps what it has."""
    for name, fn in _TORCH_ROUTES.items():
        if hasattr(torch_c, name):
            setattr(torch_c, name, fn)
