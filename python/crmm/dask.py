"""crmm in every Dask worker: a worker plugin in the shape of dask-cuda's RMMSetup, and the
worker metrics distributed's dashboard reads.

    from crmm.dask import CRMMSetup
    client.register_worker_plugin(CRMMSetup(pool_size="4GiB"))   # or client.register_plugin(...)

Each worker then loads crmm's config and builds its resource, on its own GPU (device 0 of the
worker: the one dask-cuda's CUDA_VISIBLE_DEVICES gives it first) in place of the one the device
had (a setup registered again replaces the resource, as RMMSetup's does), or from a host config
without a GPU. The config is either a file (``config=``), or made from RMM-style options as
dask-cuda's ``LocalCUDACluster(rmm_pool_size=..., rmm_async=..., rmm_managed_memory=...,
rmm_log_directory=..., rmm_track_allocations=...)`` make RMM's:

  - ``async_=True``: ``async`` (cudaMallocFromPoolAsync), primed with ``pool_size``, keeping
    ``release_threshold``; ``maximum_pool_size`` becomes a ``limiting`` adaptor over it;
  - else ``cuda`` (or ``managed`` with ``managed=True``), under a ``pool`` of ``pool_size``
    growing to ``maximum_pool_size`` when ``pool_size`` is given;
  - ``tracking=True`` puts a ``tracking`` adaptor on top, ``statistics=True`` a ``statistics``
    one, and ``log_directory`` a ``logging`` one writing ``crmm_log_<worker name>.csv`` there.

A setup that fails (a broken config, a plugin that cannot be loaded, a device resource without a
device) raises crmm's error, with the config's message, from the registration call.

Metrics, in every heartbeat (``worker.metrics``; the scheduler shows them per worker):
  - ``"rmm"``: ``{"rmm-used", "rmm-total"}``, what distributed's RMM dashboard plots: bytes in
    use and bytes reserved (at least those in use) of the worker's resource, 0 where the
    resource cannot tell;
  - ``"crmm"``: the resource's kind, name, chain (``"pool -> cuda"``), device, and its bytes in
    use, reserved and their peaks (None where it cannot tell).
"""

import os
import re

from distributed.diagnostics.plugin import WorkerPlugin

from . import _lib
from ._errors import CrmmError
from ._host import bool_arg
from .pylibrmm.memory_resource import MemoryResource, get_per_device_resource, set_per_device_resource

# the queries the "crmm" metric reports
_FIGURES = ("bytes_in_use", "bytes_in_use_peak", "bytes_reserved", "bytes_reserved_peak")


def _size_text(value, what):
    """A size option as the config takes it: an int (bytes) or a string ("4GiB", "50%")."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{what} must be a number of bytes or a size string, not {value!r}")
    if isinstance(value, int) and value <= 0:
        raise ValueError(f"{what} must be > 0, not {value}")
    text = str(value).strip()
    if not text or re.search(r"[\s,;#\[\]=\0]", text):
        raise ValueError(f"{what} {value!r} is not a size")
    return text


def config_text(pool_size=None, maximum_pool_size=None, async_=False, managed=False, release_threshold=None,
                log_file=None, tracking=False, statistics=False):
    """The crmm.ini that RMM-style options describe (see the module's docstring); its default
    resource is the top of the chain. ValueError for options that cannot go together (the
    config would leave one out), TypeError for async_, managed, tracking or statistics other
    than True or False."""
    for flag, value in (("async_", async_), ("managed", managed), ("tracking", tracking), ("statistics", statistics)):
        bool_arg(value, flag)
    if maximum_pool_size is not None and pool_size is None and not async_:
        raise ValueError("maximum_pool_size needs pool_size (the pool's initial size)")
    if async_ and managed:
        raise ValueError("managed memory cannot come from the async resource")
    if release_threshold is not None and not async_:
        raise ValueError("release_threshold needs async_=True")
    sections = []

    def add(name, plugin, upstream=None, **params):
        lines = [f"[resource.{name}]", f"plugin = {plugin}"]
        if upstream:
            lines.append(f"upstream = {upstream}")
        lines += [f"{k} = {v}" for k, v in params.items() if v is not None]
        sections.append("\n".join(lines))
        return name

    if async_:
        top = add("device", "async",
                  initial_pool_size=_size_text(pool_size, "pool_size") if pool_size is not None else None,
                  release_threshold=_size_text(release_threshold, "release_threshold")
                  if release_threshold is not None else None)
        if maximum_pool_size is not None:
            top = add("limit", "limiting", top, allocation_limit=_size_text(maximum_pool_size, "maximum_pool_size"))
    else:
        top = add("device", "managed" if managed else "cuda")
        if pool_size is not None:
            top = add("pool", "pool", top, initial_size=_size_text(pool_size, "pool_size"),
                      maximum_size=_size_text(maximum_pool_size, "maximum_pool_size")
                      if maximum_pool_size is not None else None)
    if statistics:
        top = add("statistics", "statistics", top)
    if tracking:
        top = add("tracking", "tracking", top)
    if log_file is not None:
        # the config cuts a value at a line's end and at a ';' after a blank (a comment), and
        # strips blanks around it; '#' and other ';' are the value's own
        if re.search(r"[\n\r\0]|(^|\s);", log_file) or log_file != log_file.strip():
            raise ValueError(f"log file {log_file!r} cannot be written into a config")
        top = add("log", "logging", top, file=log_file)
    return f"[crmm]\ndefault = {top}\n\n" + "\n\n".join(sections) + "\n"


def _chain(mr):
    kinds = []
    while mr is not None:
        kinds.append(mr.kind)
        mr = mr._upstream_or_none()
    return " -> ".join(kinds)


def _figure(mr, what):
    try:
        return mr.query(what)
    except CrmmError:
        return None


def rmm_metric(mr):
    """distributed's RMM metric for `mr`: {"rmm-used", "rmm-total"}."""
    used = _figure(mr, "bytes_in_use") or 0
    reserved = _figure(mr, "bytes_reserved") or 0
    return {"rmm-used": used, "rmm-total": max(used, reserved)}


def crmm_metric(mr, device):
    """What the "crmm" metric reports for `mr` on `device` (-1: host memory)."""
    out = {"kind": mr.kind, "name": mr.name, "chain": _chain(mr), "device": device}
    out.update((what, _figure(mr, what)) for what in _FIGURES)
    return out


def _set_config_resource(device):
    """Make the loaded config's resource for `device` that device's resource. crmm_init alone
    reaches only devices whose resource is not made yet: a worker set up before (a CRMMSetup
    replaced by a new one), or one that used crmm before, would keep its old resource."""
    name = _lib.text(_lib.lib.crmm_config_default_resource(_lib.lib.crmm_current_config(), device))
    if name:
        mr = MemoryResource.from_config(name, device=device)
    else:  # a config naming no resource: crmm's built-in default
        with _lib.device_context(device):
            mr = MemoryResource("cuda")
    set_per_device_resource(device, mr)


class CRMMSetup(WorkerPlugin):
    """Sets crmm up in every worker (see the module's docstring).

    config: a crmm.ini path every worker loads (exclusive with the RMM-style options);
    pool_size, maximum_pool_size: sizes (bytes, or "4GiB", "90%");
    async_, managed, release_threshold, log_directory, tracking, statistics: as RMM's;
    device: the worker's device ordinal (default 0, the first it sees).
    Bad sizes, contradicting options and a log directory a config cannot hold (a line break, or
    a ';' after a blank) raise ValueError here; async_, managed, tracking or statistics other
    than True or False raise TypeError.
    """

    name = "crmm-setup"

    def __init__(self, config=None, pool_size=None, maximum_pool_size=None, async_=False, managed=False,
                 release_threshold=None, log_directory=None, tracking=False, statistics=False, device=None):
        rmm_style = (pool_size, maximum_pool_size, release_threshold, log_directory)
        if config is not None and (any(v is not None for v in rmm_style) or async_ or managed or tracking or statistics):
            raise ValueError("CRMMSetup: config= names the whole setup; give it alone, or RMM-style options without it")
        if device is not None and (isinstance(device, bool) or not isinstance(device, int) or device < 0):
            raise ValueError(f"CRMMSetup: device must be an ordinal >= 0, not {device!r}")
        self.config = os.fspath(config) if config is not None else None
        self.options = dict(pool_size=pool_size, maximum_pool_size=maximum_pool_size, async_=async_, managed=managed,
                            release_threshold=release_threshold, tracking=tracking, statistics=statistics)
        self.log_directory = os.fspath(log_directory) if log_directory is not None else None
        self.device = device
        if self.config is None:
            log_file = (None if self.log_directory is None
                        else os.path.join(os.path.abspath(self.log_directory), "crmm_log_w.csv"))
            try:
                # bad sizes, options and log directories are the caller's error, here
                config_text(log_file=log_file, **self.options)
            except ValueError as e:
                raise ValueError(f"CRMMSetup: {e}") from None

    def _config_path(self, worker):
        """The config this worker loads: the file given, else one written into the worker's
        local directory."""
        if self.config is not None:
            return self.config
        label = re.sub(r"[^A-Za-z0-9_.-]", "_", str(worker.name))
        log_file = None
        if self.log_directory is not None:
            os.makedirs(self.log_directory, exist_ok=True)
            # a path, not a pattern: a % in the directory's name stays a % (%% in the config)
            log_file = os.path.join(os.path.abspath(self.log_directory), f"crmm_log_{label}.csv").replace("%", "%%")
        path = os.path.join(worker.local_directory, f"crmm_{label}.ini")
        with open(path, "w", encoding="utf-8") as f:
            f.write(config_text(log_file=log_file, **self.options))
        return path

    def setup(self, worker):
        path = self._config_path(worker)
        _lib.initialize(path)
        if _lib.device_count() > 0:
            device = self.device if self.device is not None else 0
            _set_config_resource(device)  # a device that does not exist fails the setup

            # the device's resource at each heartbeat, as distributed's RMM metric reads it: one
            # held from here would be reported, and kept with its memory, after the worker
            # replaced it (crmm.reinitialize, set_per_device_resource)
            def current(d=device):
                return get_per_device_resource(d)
        else:
            device = -1
            default = _lib.text(_lib.lib.crmm_config_default_resource(_lib.lib.crmm_current_config(), -1))
            mr = MemoryResource.from_config(default, device=-1)

            def current(mr=mr):
                return mr
        self._current, self.resource_device, self.config_path = current, device, path
        worker.metrics["rmm"] = lambda w: rmm_metric(current())
        worker.metrics["crmm"] = lambda w, d=device: crmm_metric(current(), d)

    @property
    def resource(self):
        """The worker's resource now (None before setup and after teardown)."""
        current = getattr(self, "_current", None)
        return current() if current is not None else None

    def teardown(self, worker):
        worker.metrics.pop("rmm", None)
        worker.metrics.pop("crmm", None)
        self._current = None
