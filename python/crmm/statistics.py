"""rmm.statistics: allocation statistics of the current device's resource, and a memory
profiler of functions and code blocks built on them.

Statistics are on while the current device's resource is a StatisticsResourceAdaptor.
enable_statistics() puts one on top of the current resource; statistics() does so for a block
of code (or, when one is there already, pushes a fresh frame of counters for the block).
"""

import inspect
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps

from .pylibrmm import memory_resource as _mr

__all__ = [
    "ProfilerContext",
    "ProfilerRecords",
    "Statistics",
    "default_profiler_records",
    "enable_statistics",
    "get_statistics",
    "pop_statistics",
    "profiler",
    "push_statistics",
    "statistics",
]


@dataclass
class Statistics:
    """Counters of one frame of a StatisticsResourceAdaptor: bytes and allocations live now
    (current_*), at most at once (peak_*) and ever (total_*)."""

    current_bytes: int
    current_count: int
    peak_bytes: int
    peak_count: int
    total_bytes: int
    total_count: int

    @classmethod
    def _from_counters(cls, c):
        """From crmm_alloc_counters."""
        return cls(
            current_bytes=c.bytes,
            current_count=c.count,
            peak_bytes=c.peak_bytes,
            peak_count=c.peak_count,
            total_bytes=c.total_bytes,
            total_count=c.total_count,
        )


def _statistics_resource():
    """The current device's resource when it counts statistics, else None."""
    current = _mr.get_current_device_resource()
    return current if isinstance(current, _mr.StatisticsResourceAdaptor) else None


def enable_statistics():
    """Put a StatisticsResourceAdaptor on top of the current device's resource (nothing when
    the current resource is one already). Raises CudaError without a device."""
    if _statistics_resource() is None:
        _mr.set_current_device_resource(_mr.StatisticsResourceAdaptor(_mr.get_current_device_resource()))


def get_statistics():
    """The counters of the current frame, or None when statistics are off."""
    res = _statistics_resource()
    return res.allocation_counts if res is not None else None


def push_statistics():
    """Start a fresh frame of counters; returns the counters of the frame it covers, or None
    (and does nothing) when statistics are off."""
    res = _statistics_resource()
    return res.push_counters() if res is not None else None


def pop_statistics():
    """End the current frame (its counts add to the frame below); returns its counters, or None
    when statistics are off. Raises StateError when no frame was pushed."""
    res = _statistics_resource()
    return res.pop_counters() if res is not None else None


@contextmanager
def statistics():
    """Count the allocations of a block of code: a fresh frame when statistics are on, else a
    StatisticsResourceAdaptor over the current resource for the block (the previous resource
    comes back at the end). Raises ValueError at the end when the block changed the current
    device's resource (nothing is restored then)."""
    if push_statistics() is None:
        previous = _mr.get_current_device_resource()
        enable_statistics()
    else:
        previous = None
    inside = _mr.get_current_device_resource()
    try:
        yield
    finally:
        if _mr.get_current_device_resource() is not inside:
            raise ValueError(
                "RMM memory source stack was changed while in the statistics context "
                "(the current device's resource was changed inside the statistics() block)"
            )
        if previous is None:
            pop_statistics()
        else:
            _mr.set_current_device_resource(previous)


class ProfilerRecords:
    """Memory statistics per profiled function or block, by name (thread-safe)."""

    @dataclass
    class MemoryRecord:
        """One name's record: calls, bytes allocated over all calls, the highest peak of one
        (RMM's ProfilerRecords.MemoryRecord; Data is its older name)."""

        num_calls: int = 0
        memory_total: int = 0
        memory_peak: int = 0

        def add(self, memory_total, memory_peak):
            self.num_calls += 1
            self.memory_total += memory_total
            self.memory_peak = max(self.memory_peak, memory_peak)

    Data = MemoryRecord

    def __init__(self):
        self._lock = threading.Lock()
        self._records = {}

    def add(self, name, data):
        """Count one call of `name` whose frame had the counters `data` (a Statistics)."""
        with self._lock:
            self._records.setdefault(name, ProfilerRecords.MemoryRecord()).add(data.total_bytes, data.peak_bytes)

    @property
    def records(self):
        """{name: ProfilerRecords.MemoryRecord} (a copy of the table)."""
        with self._lock:
            return dict(self._records)

    def report(self, ordered_by="memory_peak"):
        """The records as a table, largest `ordered_by` (num_calls, memory_peak or
        memory_total) first. Raises ValueError for another key when there are records to sort."""
        records = self.records
        lines = ["Memory Profiling", "================", ""]
        if not records:  # as RMM, whatever ordered_by is: nothing is sorted
            return "\n".join(lines) + "\nNo data, maybe profiling wasn't enabled?"
        if ordered_by not in ("num_calls", "memory_peak", "memory_total"):
            raise ValueError(f"ordered_by must be num_calls, memory_peak or memory_total, not {ordered_by!r}")
        rows = sorted(records.items(), key=lambda item: getattr(item[1], ordered_by), reverse=True)
        # RMM's layout (26.06): a legend, the order, then one row per record
        lines += [
            "Legends:",
            "  ncalls       - number of times the function or code block was called",
            "  memory_peak  - peak memory allocated in function or code block (in bytes)",
            "  memory_total - total memory allocated in function or code block (in bytes)",
            "",
            f"Ordered by: {ordered_by}",
            "",
            "ncalls     memory_peak    memory_total  filename:lineno(function)",
        ]
        lines += [f"{d.num_calls:6,d} {d.memory_peak:15,d} {d.memory_total:15,d}  {name}" for name, d in rows]
        return "\n".join(lines)

    pretty_print = report  # the name RMM used before report

    def __repr__(self):
        return f"{type(self).__name__}({self.records})"

    def __str__(self):
        return self.report()


def _get_descriptive_name_of_object(obj):
    """"file:line(qualified name)" of a function or class (of the function a decorator
    wrapped, through __wrapped__), as the profiler names its records; line is where its
    source starts. "<unknown>:0(...)" when Python has no source for it (a builtin, code
    made by exec)."""
    obj = inspect.unwrap(obj)
    try:
        _, line = inspect.getsourcelines(obj)
        path = inspect.getfile(obj)
    except (OSError, TypeError):
        path, line = "<unknown>", 0
    return f"{path}:{line}({getattr(obj, '__qualname__', repr(obj))})"


default_profiler_records = ProfilerRecords()


class ProfilerContext:
    """What profiler() returns (RMM's class of that name): a decorator of functions and, with a
    name, a context manager of blocks, recording each call's or block's statistics in
    `records` under `name` (a decorated function's "file:line(name)" when `name` is empty or
    None). `records` is a ProfilerRecords or, as in RMM, any object with an add(name, data)
    method. Raises TypeError, when made, for records without one or a name that cannot be a key
    of a table (unhashable)."""

    def __init__(self, records, name):
        if not callable(getattr(records, "add", None)):
            raise TypeError(f"records must be a ProfilerRecords (or have an add method), not {type(records).__name__}")
        if name is None:  # RMM takes any false name as none given (a wrapper may pass None on)
            name = ""
        try:  # any key a table takes, as in RMM (a str, a tuple, an enum member, ...)
            hash(name)
        except TypeError:
            raise TypeError(f"name must be hashable (a key of the records), not {type(name).__name__}") from None
        self.records, self.name = records, name

    def _record(self, name):
        stats = pop_statistics()
        if stats is not None:
            self.records.add(name, stats)

    def __call__(self, func):
        if not callable(func):
            raise TypeError(f"profiler decorates a callable, not {type(func).__name__}")
        name = self.name or _get_descriptive_name_of_object(func)

        @wraps(func)
        def profiled(*args, **kwargs):
            push_statistics()
            try:
                return func(*args, **kwargs)
            finally:
                self._record(name)

        return profiled

    def __enter__(self):
        if not self.name:
            raise ValueError("When profiler is used as a context manager, a name must be provided")
        push_statistics()
        return self

    def __exit__(self, *exc):
        self._record(self.name)
        return False


def profiler(*, records=default_profiler_records, name=""):
    """A decorator (or, with a `name`, a context manager) that records the memory statistics of
    each call of a function (or each run of a block) in `records`, when statistics are on;
    otherwise it does nothing. A decorated function is named "file:line(name)" unless `name`
    is given (None is no name, as in RMM). `records` is a ProfilerRecords or, as in RMM, any
    object with an add(name, data) method. Raises TypeError when it has none or `name` is
    unhashable, ValueError when used as a context manager without a name."""
    return ProfilerContext(records, name)
