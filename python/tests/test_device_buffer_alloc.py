"""DeviceBuffer's allocate and free path (crmm/_alloc.py), through the C extension crmm._fastalloc
and through ctypes: the same results, errors and frees on both, and the extension's own checks.

No device needed: the buffers come from a `callback` resource whose memory is host memory that
libcrmm is told is device memory (so DeviceBuffer takes it), under a `statistics` adaptor that
counts what is outstanding. Nothing here zero-fills or copies (that needs CUDA; the GPU tests do).
"""

import ctypes
import ctypes.util
import gc
import os
import platform
import subprocess
import sys
import weakref

import numpy as np
import pytest

import crmm
from crmm import _alloc
from crmm._errors import StateError
from crmm.pylibrmm.device_buffer import DeviceBuffer
from crmm.pylibrmm.memory_resource import MemoryResource, StatisticsResourceAdaptor
from crmm.pylibrmm.stream import DEFAULT_STREAM, PER_THREAD_DEFAULT_STREAM

_libc = ctypes.CDLL(None)
_libc.aligned_alloc.restype = ctypes.c_void_p
_libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)
LIMIT = 1 << 30  # the callbacks refuse more (NULL: out of memory)
_KEPT_TRAMPOLINES = []


class HostAsDevice:
    """A callback resource over aligned host memory, flagged device accessible; `live` maps each
    block it handed out to its size."""

    def __init__(self):
        self.live = live = {}
        me = weakref.ref(self)

        def allocate(n, stream, arg):
            obj = me()
            return obj._allocate(n, stream, arg) if obj is not None else None

        def deallocate(p, n, stream, arg):
            obj = me()
            if obj is not None:
                obj._deallocate(p, n, stream, arg)
            else:  # a buffer that outlived this object
                live.pop(p, None)
                _libc.free(p)

        self._alloc, self._free = _ALLOC(allocate), _FREE(deallocate)
        address = lambda f: ctypes.cast(f, ctypes.c_void_p).value  # noqa: E731
        self.mr = MemoryResource("callback", {"allocate_fn": address(self._alloc), "deallocate_fn": address(self._free)})
        # the trampolines (not this object or its resource: they reach it through a weak
        # reference) are kept to the end: a buffer that outlives this object (held by a failed
        # test's traceback, freed by the last collection at exit) is then freed through live ones
        _KEPT_TRAMPOLINES.append((self._alloc, self._free))

    def _allocate(self, n, stream, arg):
        if n > LIMIT:
            return None
        p = _libc.aligned_alloc(256, max(256, (n + 255) // 256 * 256))
        self.live[p] = n
        return p

    def _deallocate(self, p, n, stream, arg):
        assert self.live.pop(p) == n
        _libc.free(p)


@pytest.fixture(params=["extension", "ctypes"])
def backend(request):
    """Every test runs once through each implementation (the extension's run skips where
    configure did not build it)."""
    if request.param == "extension" and _alloc.extension is None:
        pytest.skip("crmm._fastalloc is not built here")
    before = _alloc.use(request.param)
    yield request.param
    _alloc.use(before)


@pytest.fixture
def host():
    h = HostAsDevice()
    yield h
    gc.collect()
    assert h.live == {}, "blocks left outstanding"


@pytest.fixture
def stats(host):
    return StatisticsResourceAdaptor(host.mr)


def callback_device():
    """The device of a callback resource: the current one (0 in these tests), none without one."""
    return 0 if crmm._lib.device_count() > 0 else -1


def outstanding(stats):
    c = stats.allocation_counts
    return c.current_bytes, c.current_count


def test_the_extension_is_used_where_it_is_built():
    """`make check` builds the extension where configure found Python's headers and points
    $CRMM_FASTALLOC at it; the package must then use it, not fall back quietly."""
    if os.environ.get("CRMM_FASTALLOC", "off") == "off":
        pytest.skip("crmm._fastalloc is not built here")
    assert _alloc.extension is not None
    assert DeviceBuffer._uninitialized.__self__ is DeviceBuffer
    assert _alloc.ops.name == "extension"


def test_create_and_drop_leaves_nothing_outstanding(backend, stats):
    for _ in range(1000):
        DeviceBuffer._uninitialized(4096, mr=stats)
    kept = [DeviceBuffer._uninitialized(n, mr=stats) for n in (1, 256, 4096, 1 << 20)]
    assert outstanding(stats) == (1 + 256 + 4096 + (1 << 20), 4)
    del kept
    assert outstanding(stats) == (0, 0)
    assert stats.allocation_counts.total_count == 1004


def test_a_buffer_reports_its_memory(backend, host, stats):
    db = DeviceBuffer._uninitialized(4096, mr=stats)
    assert db.ptr in host.live and host.live[db.ptr] == 4096
    assert db.ptr % 256 == 0
    assert (db.size, db.nbytes, len(db), db.capacity()) == (4096, 4096, 4096, 4096)
    assert db.device == callback_device()
    assert db.stream is DEFAULT_STREAM
    iface = db.__cuda_array_interface__
    assert iface["data"] == (db.ptr, False) and iface["shape"] == (4096,) and iface["typestr"] == "|u1"
    assert repr(db) == f"<crmm DeviceBuffer size=4096 ptr=0x{db.ptr:x}>"


def test_a_size_0_buffer_has_no_memory(backend, stats):
    db = DeviceBuffer(size=0, mr=stats)  # nothing to zero-fill: no CUDA call
    assert (db.ptr, db.size) == (0, 0)
    assert db.__cuda_array_interface__["data"] == (0, False)


def test_the_buffer_keeps_its_resource_and_stream_alive(backend, host):
    stats = StatisticsResourceAdaptor(host.mr)
    stream = crmm.pylibrmm.stream.Stream(PER_THREAD_DEFAULT_STREAM)
    db = DeviceBuffer._uninitialized(4096, stream=stream, mr=stats)
    del stats, stream
    gc.collect()
    assert len(host.live) == 1
    assert db.stream.handle == PER_THREAD_DEFAULT_STREAM.handle
    assert db.mr.kind == "statistics"
    del db
    assert host.live == {}


def test_index_sizes_are_taken(backend, stats):
    assert DeviceBuffer._uninitialized(np.int64(100), mr=stats).size == 100


@pytest.mark.parametrize("size, error", [
    (-1, ValueError), (-(1 << 70), ValueError), (1 << 64, OverflowError), (1 << 100, OverflowError),
    ("4096", TypeError), (4096.0, TypeError), (True, TypeError), (None, TypeError),
])
def test_bad_sizes_are_refused_before_anything_is_allocated(backend, stats, size, error):
    with pytest.raises(error):
        DeviceBuffer._uninitialized(size, mr=stats)
    with pytest.raises(error):
        DeviceBuffer(size=size, mr=stats)
    assert stats.allocation_counts.total_count == 0


def test_a_size_the_resource_cannot_give_is_out_of_memory(backend, stats):
    for size in (LIMIT + 1, (1 << 64) - 1):
        with pytest.raises(crmm.OutOfMemoryError, match="callback"):
            DeviceBuffer._uninitialized(size, mr=stats)
    assert issubclass(crmm.OutOfMemoryError, MemoryError)
    assert outstanding(stats) == (0, 0)
    assert DeviceBuffer._uninitialized(4096, mr=stats).size == 4096  # nothing was corrupted


@pytest.mark.parametrize("kwargs, error", [
    ({"stream": 0}, TypeError), ({"stream": "default"}, TypeError), ({"mr": "pool"}, TypeError),
    ({"mr": 12345}, TypeError),
])
def test_bad_stream_and_resource_arguments_are_refused(backend, stats, kwargs, error):
    kwargs.setdefault("mr", stats)
    with pytest.raises(error):
        DeviceBuffer(size=16, **kwargs)
    assert stats.allocation_counts.total_count == 0


def test_a_host_only_resource_is_refused(backend):
    with pytest.raises(crmm.InvalidArgumentError, match="not device accessible"):
        DeviceBuffer._uninitialized(16, mr=crmm.mr.HostMemoryResource())


def test_a_released_resource_is_refused(backend, host):
    stats = StatisticsResourceAdaptor(host.mr)
    stats.__del__()
    with pytest.raises(StateError, match="released"):
        DeviceBuffer._uninitialized(16, mr=stats)


def test_a_failed_zero_fill_raises_cuda_error_and_frees_the_buffer(backend, stats):
    """DeviceBuffer(size=n) zero-fills; here cudaMemsetAsync fails (no driver, or no device for
    the host memory): CudaError naming it, the buffer freed, on both implementations alike."""
    if crmm._lib.device_count() > 0:
        pytest.skip("a CUDA device is present: the fill would not fail")
    with pytest.raises(crmm.CudaError, match="cudaMemsetAsync"):
        DeviceBuffer(size=4096, mr=stats)
    assert outstanding(stats) == (0, 0)
    assert stats.allocation_counts.total_count == 1


class _Memory:
    """A stand-in for cupy.cuda.UnownedMemory: keeps its owner, as CuPy's does."""

    def __init__(self, ptr, size, owner, device_id):
        self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id


class _Refused(_Memory):
    def __init__(self, *args):
        raise RuntimeError("refused by the memory class")


def test_create_wrapped_hands_the_buffer_to_a_foreign_owner(backend, host, stats):
    """What crmm's CuPy allocator returns on a default stream: pointer(memory(ptr, size, owner,
    device), 0), the owner a DeviceBuffer on that stream, the memory freed when that object goes;
    a class that raises frees it at once."""
    wrap = _alloc.ops.create_wrapped
    made = wrap(1000, None, stats._handle, _Memory, lambda mem, offset: (mem, offset), DeviceBuffer, DEFAULT_STREAM)
    mem, offset = made
    assert offset == 0 and mem.size == 1000 and host.live[mem.ptr] == 1000
    assert type(mem.owner) is DeviceBuffer and mem.owner.ptr == mem.ptr and mem.owner.size == 1000
    assert mem.owner.stream is DEFAULT_STREAM and mem.device_id == mem.owner._buf.device()
    assert stats.query("bytes_in_use") == 1000
    del made, mem
    gc.collect()
    assert stats.query("bytes_in_use") == 0 and host.live == {}
    with pytest.raises(RuntimeError, match="refused by the memory class"):
        wrap(1000, None, stats._handle, _Refused, lambda mem, offset: mem, DeviceBuffer, DEFAULT_STREAM)
    gc.collect()
    assert stats.query("allocations_total") == 2 and stats.query("bytes_in_use") == 0
    with pytest.raises(ValueError):
        wrap(-1, None, stats._handle, _Memory, lambda mem, offset: mem, DeviceBuffer, DEFAULT_STREAM)
    with pytest.raises(TypeError):
        wrap(1000, None, stats._handle, _Memory, lambda mem, offset: mem, "not a type", DEFAULT_STREAM)
    gc.collect()
    assert stats.query("bytes_in_use") == 0


class _CupyStream:
    def __init__(self, ptr):
        self.ptr = ptr


def test_cupy_allocator_serves_known_streams_in_c_and_passes_the_rest_on(ext, host, stats):
    """The extension's allocator behind crmm.allocators.cupy: a positive int on a stream the
    table knows is served from the resource given, owned by a DeviceBuffer on that stream; any
    other call reaches the fallback unchanged; errors raise with nothing left allocated."""
    current = [_CupyStream(0)]
    passed_on = []

    def fallback(nbytes):
        passed_on.append(nbytes)
        return "fallback"

    streams = {0: (DEFAULT_STREAM, DEFAULT_STREAM._cstream)}
    allocate = ext.cupy_allocator(lambda: current[0], streams, _Memory, lambda mem, offset: (mem, offset),
                                  DeviceBuffer, stats._handle, crmm._lib, fallback)
    assert allocate.__name__ == "rmm_cupy_allocator" and allocate.__module__ == "crmm.allocators.cupy"
    mem, offset = allocate(1000)
    assert offset == 0 and mem.size == 1000 and host.live[mem.ptr] == 1000 and passed_on == []
    assert type(mem.owner) is DeviceBuffer and mem.owner.stream is DEFAULT_STREAM and mem.owner.ptr == mem.ptr
    assert stats.query("bytes_in_use") == 1000
    del mem
    gc.collect()
    assert stats.query("bytes_in_use") == 0
    current[0] = _CupyStream(12345)  # a stream the table does not know
    assert allocate(64) == "fallback"
    current[0] = _CupyStream(0)
    assert [allocate(0), allocate(np.int64(8)), allocate(True)] == ["fallback"] * 3
    assert [allocate(-5), allocate(2**70)] == ["fallback"] * 2  # the fallback names what is wrong with them
    assert passed_on == [64, 0, np.int64(8), True, -5, 2**70] and stats.query("allocations_total") == 1
    with pytest.raises(RuntimeError, match="refused by the memory class"):
        ext.cupy_allocator(lambda: current[0], streams, _Refused, lambda mem, offset: mem, DeviceBuffer,
                           stats._handle, crmm._lib, fallback)(1000)
    gc.collect()
    assert stats.query("allocations_total") == 2 and stats.query("bytes_in_use") == 0

    def no_stream():
        raise RuntimeError("no current stream")

    with pytest.raises(RuntimeError, match="no current stream"):
        ext.cupy_allocator(no_stream, streams, _Memory, tuple, DeviceBuffer, stats._handle, crmm._lib, fallback)(8)
    with pytest.raises(TypeError, match="maps a stream"):
        ext.cupy_allocator(lambda: current[0], {0: DEFAULT_STREAM}, _Memory, tuple, DeviceBuffer, stats._handle,
                           crmm._lib, fallback)(8)
    assert stats.query("allocations_total") == 2


MEMORY_TYPE_SCRIPT = """
import gc, sys
sys.path.insert(0, sys.argv[1])
import test_device_buffer_alloc as t
ext = t._alloc.extension
for base, says in ((object(), "takes 2 types"), (t._Memory, "no GC"), (int, "fixed size")):
    try:
        ext.cupy_memory_type(base, t.DeviceBuffer)
    except TypeError as e:
        assert says in str(e), e
    else:
        raise AssertionError(f"{base!r} was taken")
# float: subclassable, no GC, fixed size, no __dict__ -- but no ptr/size/device_id to set
memory = ext.cupy_memory_type(float, t.DeviceBuffer)
assert issubclass(memory, float) and memory.__name__ == "CupyMemory"
assert ext.cupy_memory_type(float, t.DeviceBuffer) is memory
try:
    ext.cupy_memory_type(complex, t.DeviceBuffer)
except RuntimeError as e:
    assert "another base" in str(e), e
else:
    raise AssertionError("a second base was taken")
try:
    memory()
except TypeError:
    pass
else:
    raise AssertionError("the memory type was instantiated from Python")
host = t.HostAsDevice()
stats = t.StatisticsResourceAdaptor(host.mr)
streams = {0: (t.DEFAULT_STREAM, t.DEFAULT_STREAM._cstream)}
allocate = ext.cupy_allocator(lambda: t._CupyStream(0), streams, memory, lambda mem, offset: (mem, offset),
                              t.DeviceBuffer, stats._handle, t.crmm._lib, lambda n: None)
for _ in range(3):
    try:
        allocate(1000)
    except AttributeError:
        pass
    else:
        raise AssertionError("a memory without ptr was handed out")
gc.collect()
assert stats.query("allocations_total") == 3 and stats.query("bytes_in_use") == 0 and host.live == {}
print("ok")
"""


def test_cupy_memory_type_checks_its_base_and_frees_on_failure(ext, tmp_path):
    """cupy_memory_type subclasses a base whose instances hold no objects, once per process
    (so in a process of its own): bad bases are refused naming why, a second base is refused,
    the type cannot be made from Python, and an allocation whose memory cannot be filled in
    (float has no ptr) raises with the buffer freed. CuPy's own BaseMemory: the GPU tests."""
    script = tmp_path / "memory_type.py"
    script.write_text(MEMORY_TYPE_SCRIPT)
    env = dict(os.environ, CRMM_FASTALLOC=os.environ.get("CRMM_FASTALLOC", ""))
    done = subprocess.run([sys.executable, str(script), os.path.dirname(__file__)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


LAYOUT_SCRIPT = """
import gc, importlib.util, sys
sys.path.insert(0, sys.argv[1])
import test_device_buffer_alloc as t
spec = importlib.util.spec_from_file_location("_fake_cupy_memory", sys.argv[2])
fake = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fake)
ext = t._alloc.extension
memory = ext.cupy_memory_type(getattr(fake, sys.argv[3]), t.DeviceBuffer)
pointer = getattr(fake, sys.argv[4])
host = t.HostAsDevice()
stats = t.StatisticsResourceAdaptor(host.mr)
streams = {0: (t.DEFAULT_STREAM, t.DEFAULT_STREAM._cstream)}
allocate = ext.cupy_allocator(lambda: t._CupyStream(0), streams, memory, pointer, t.DeviceBuffer, stats._handle,
                              t.crmm._lib, lambda n: None)
layout = ext.cupy_layout()
held = [allocate(n) for n in (256, 1000, 4096)]
for p, n in zip(held, (256, 1000, 4096)):
    assert type(p) is pointer and type(p.mem) is memory, (type(p), type(p.mem))
    assert host.live.get(p.ptr) == n and p.mem.ptr == p.ptr and p.mem.size == n, (p.ptr, p.mem.size, n)
    assert p.device_id == p.mem.device_id == p.mem._owner._buf.device(), (p.device_id, p.mem.device_id)
    assert p.mem._owner.ptr == p.ptr and p.mem._owner.size == n
assert len({p.ptr for p in held}) == 3
assert stats.query("bytes_in_use") == 256 + 1000 + 4096
del held, p
gc.collect()
assert stats.query("bytes_in_use") == 0 and host.live == {}
print(layout)
"""


@pytest.mark.parametrize("memory, pointer, layout", [
    ("BaseMemory", "MemoryPointer", (True, True)),
    ("BaseMemory", "ObjectDevicePointer", (True, False)),
    ("ScrambledMemory", "MemoryPointer", (False, False)),
])
def test_cupy_allocator_writes_cupys_fields_where_it_found_them(ext, tmp_path, memory, pointer, layout):
    """The CuPy allocator writes the memory's ptr, size and device_id and makes the MemoryPointer
    directly where it found the fields (types laid out as Cython lays out CuPy's,
    fake_cupy_memory.c), and goes the public way (attributes, a call) where it did not: a field
    kept in another form. Either way every pointer, memory and owner reads right and every block
    goes back. One process each: the memory type is made once per process."""
    where = os.environ.get("CRMM_FAKE_CUPY_MEMORY", "off")
    if where == "off":
        pytest.skip("the fake CuPy memory module is not built here (no Python headers)")
    script = tmp_path / "layout.py"
    script.write_text(LAYOUT_SCRIPT)
    done = subprocess.run([sys.executable, str(script), os.path.dirname(__file__), where, memory, pointer],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, CRMM_FASTALLOC=os.environ.get("CRMM_FASTALLOC", "")))
    assert done.returncode == 0 and done.stdout == f"{layout}\n", done.stdout + done.stderr


@pytest.mark.parametrize("change, error", [
    ({"count": 7}, "takes 8 arguments"), ({0: None}, "must be callable"), ({2: 5}, "must be callable"),
    ({1: []}, "must be a dict"), ({4: "DeviceBuffer"}, "owner_type a type"), ({5: -1}, "mr"),
])
def test_cupy_allocator_refuses_bad_arguments(ext, change, error):
    args = [lambda: _CupyStream(0), {}, _Memory, tuple, DeviceBuffer, None, crmm._lib, lambda n: n]
    for i, value in change.items():
        if i != "count":
            args[i] = value
    args = args[:change.get("count", len(args))]
    with pytest.raises((TypeError, ValueError, OverflowError), match=error):
        ext.cupy_allocator(*args)


def test_a_buffer_dropped_while_an_exception_propagates_is_freed(backend, host):
    """A buffer dropped as the stack unwinds (a temporary when the expression raises) is freed
    with the exception set aside: the callback resource's free runs Python, and the exception
    that propagates is the caller's, not a SystemError."""
    def raises():
        return [DeviceBuffer._uninitialized(4096, mr=host.mr), 1 / 0]

    with pytest.raises(ZeroDivisionError):
        raises()
    assert host.live == {}


CUPY_UNWIND_SCRIPT = """
import gc, importlib.util, sys
sys.path.insert(0, sys.argv[1])
import test_device_buffer_alloc as t
spec = importlib.util.spec_from_file_location("_fake_cupy_memory", sys.argv[2])
fake = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fake)
ext = t._alloc.extension
memory = ext.cupy_memory_type(fake.BaseMemory, t.DeviceBuffer)
host = t.HostAsDevice()
streams = {0: (t.DEFAULT_STREAM, t.DEFAULT_STREAM._cstream)}
allocate = ext.cupy_allocator(lambda: t._CupyStream(0), streams, memory, fake.MemoryPointer, t.DeviceBuffer,
                              host.mr._handle, t.crmm._lib, lambda n: None)
def raises():
    return [allocate(4096), 1 / 0]
try:
    raises()
except ZeroDivisionError:
    pass
gc.collect()
assert host.live == {}, host.live
print("ok")
"""


def test_cupy_memory_dropped_while_an_exception_propagates_is_freed(ext, tmp_path):
    """As above for the CuPy allocator's memory type, which owns its buffer itself (one process:
    the memory type is made once per process)."""
    where = os.environ.get("CRMM_FAKE_CUPY_MEMORY", "off")
    if where == "off":
        pytest.skip("the fake CuPy memory module is not built here (no Python headers)")
    script = tmp_path / "unwind.py"
    script.write_text(CUPY_UNWIND_SCRIPT)
    done = subprocess.run([sys.executable, str(script), os.path.dirname(__file__), where], capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ, CRMM_FASTALLOC=os.environ.get("CRMM_FASTALLOC", "")))
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


def test_a_null_ptr_is_a_buffer_without_data(backend, host, stats, monkeypatch):
    """DeviceBuffer(ptr=0, size=n) is DeviceBuffer(size=n), as RMM takes a NULL ptr: nothing to
    copy, `size` bytes (zero-filled here by a stand-in: no device to fill them)."""
    zeroed = []
    create = _alloc.ops.create

    def create_zeroed(size, cstream, mr, cuda_stream, sync):
        zeroed.append(size)
        return create(size, cstream, mr)

    monkeypatch.setattr(_alloc.ops, "create_zeroed", create_zeroed)
    error = None
    try:
        db = DeviceBuffer(ptr=0, size=4096, mr=stats)
    except crmm.CrmmError as e:  # its traceback (and the buffer made) goes here, with the host alive
        error = repr(e)
    assert error is None, f"DeviceBuffer(ptr=0) raised {error}"
    assert (db.size, zeroed) == (4096, [4096]) and host.live[db.ptr] == 4096
    assert DeviceBuffer(ptr=0, size=0, mr=stats).size == 0
    del db
    assert outstanding(stats) == (0, 0)


def test_copy_from_device_refuses_what_is_not_device_memory_as_rmm_does():
    """An object without __cuda_array_interface__: RMM's ValueError and message (also a
    TypeError, for callers that catch that). The source is looked at first: a buffer without
    memory does."""
    db = DeviceBuffer.__new__(DeviceBuffer)
    db._buf = None
    for src in (object(), b"abc"):
        with pytest.raises(ValueError, match="Expected object to support `__cuda_array_interface__` protocol"):
            db.copy_from_device(src)
        with pytest.raises(TypeError):
            db.copy_from_device(src)


def test_a_buffer_without_memory_raises_state_error(backend):
    db = DeviceBuffer.__new__(DeviceBuffer)
    db._buf = None
    for use in (lambda: db.ptr, lambda: db.size, lambda: db.device, lambda: db.capacity(),
                lambda: db.__cuda_array_interface__, lambda: db.mr):
        with pytest.raises(StateError, match="freed"):
            use()


def test_a_buffer_made_by_one_implementation_is_used_and_freed_by_the_other(backend, host, stats):
    other = "ctypes" if backend == "extension" else "extension"
    db = DeviceBuffer._uninitialized(512, mr=stats)
    try:
        _alloc.use(other)
    except ValueError:
        pytest.skip("crmm._fastalloc is not built here")
    assert db.size == 512 and db.ptr in host.live
    del db
    assert outstanding(stats) == (0, 0)


@pytest.mark.parametrize("where, says", [("/nonexistent/_fastalloc.so", "cannot be loaded"),
                                         (ctypes.util.find_library("m") or "libm.so.6", "cannot be loaded")])
def test_a_bad_crmm_fastalloc_path_fails_the_import_naming_it(where, says):
    done = subprocess.run([sys.executable, "-c", "import crmm"], env=dict(os.environ, CRMM_FASTALLOC=where),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "CRMM_FASTALLOC" in done.stderr and says in done.stderr, done.stderr


def test_crmm_fastalloc_off_uses_ctypes():
    done = subprocess.run([sys.executable, "-c", "import crmm._alloc as a; print(a.ops.name, a.extension)"],
                          env=dict(os.environ, CRMM_FASTALLOC="off"), capture_output=True, text=True, timeout=120)
    assert done.stdout == "ctypes None\n", done.stderr


def test_use_refuses_unknown_names():
    with pytest.raises(ValueError, match="extension"):
        _alloc.use("cffi")


EXIT_SCRIPT = """
import ctypes, sys
import crmm._alloc as a
from crmm.pylibrmm.device_buffer import DeviceBuffer
from crmm.pylibrmm.memory_resource import MemoryResource, StatisticsResourceAdaptor
a.use(sys.argv[1])
libc = ctypes.CDLL(None)
address = lambda name: ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
mr = StatisticsResourceAdaptor(MemoryResource("callback", {"allocate_fn": address("valloc"), "deallocate_fn": address("free")}))
kept = [DeviceBuffer._uninitialized(4096, mr=mr) for _ in range(10)]
cycle = [DeviceBuffer._uninitialized(64, mr=mr)]
cycle.append(cycle)
print("ok", mr.allocation_counts.current_count)
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64", "aarch64", "arm64"),
                    reason="the script calls libc's valloc/free as callbacks that take more arguments")
def test_buffers_alive_at_exit_are_freed_quietly(tmp_path):
    """Buffers still referenced (and in a reference cycle) when the interpreter finalizes: no
    crash, no 'Exception ignored' message, through either implementation. The resource's
    callbacks are libc's valloc(size) and free(ptr) (page-aligned memory; the C calling convention
    of these machines lets a function ignore the extra arguments the callback passes), so that no
    Python code runs while the interpreter is torn down."""
    script = tmp_path / "exit.py"
    script.write_text(EXIT_SCRIPT)
    for name in ("extension", "ctypes"):
        if name == "extension" and _alloc.extension is None:
            continue
        done = subprocess.run([sys.executable, str(script), name], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "ok 11\n"
        assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr


THREADS_SCRIPT = """
import sys, threading, time
sys.path.insert(0, sys.argv[2])
import test_device_buffer_alloc as t
t._alloc.use(sys.argv[1])

class SlowHost(t.HostAsDevice):
    def _allocate(self, n, stream, arg):
        time.sleep(0.0005)  # lets the other threads run while the pool's lock is held
        return super()._allocate(n, stream, arg)

host = SlowHost()
pool = t.MemoryResource("pool", {"initial_size": 1 << 16}, upstream=host.mr)
errors = []

def buffers():  # through the implementation under test; kept, so the pool keeps growing
    kept = [t.DeviceBuffer._uninitialized(1 << 16, mr=pool) for i in range(100)]

def blocks():  # through MemoryResource.allocate (ctypes: the GIL is released in libcrmm)
    kept = [pool.allocate(1 << 16) for i in range(100)]
    for p in kept:
        pool.deallocate(p, 1 << 16)

def churn():  # made and dropped: served from the pool's free blocks, with the GIL held where
    for i in range(2000):  # nothing waits, while the other threads' growths hold the lock
        t.DeviceBuffer._uninitialized(256, mr=pool)

def run(fn):
    try:
        fn()
    except Exception as e:
        errors.append(e)

threads = [threading.Thread(target=run, args=(fn,)) for fn in (buffers, blocks, churn) * 3]
for th in threads:
    th.start()
for th in threads:
    th.join()
print("ok", errors)
"""


def test_threads_allocating_through_python_callbacks_do_not_deadlock(backend, tmp_path):
    """A pool over Python callbacks: a thread growing the pool holds the pool's lock while its
    callback waits for the GIL, so no thread may hold the GIL while it waits for that lock (the
    extension tries libcrmm's calls that never wait first and releases it around the rest, as
    ctypes does). Threads keeping DeviceBuffers, threads making and dropping them and threads
    calling MemoryResource.allocate share the pool; a deadlock hangs the process."""
    script = tmp_path / "threads.py"
    script.write_text(THREADS_SCRIPT)
    try:
        done = subprocess.run([sys.executable, str(script), backend, os.path.dirname(__file__)],
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the threads deadlocked")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok []\n"


# ---- the extension's own argument checks (it is private, but must never crash) -----------------

# The start of a script run in a process of its own (argv: the extension's path, this folder):
# the extension loaded by hand and bound to libcrmm's buffer functions, nothing else bound.
BOUND_EXTENSION = """
import ctypes, importlib.machinery, importlib.util, sys
sys.path.insert(0, sys.argv[2])
import test_device_buffer_alloc as t  # CRMM_FASTALLOC=off: crmm._alloc does not bind the module
import crmm
from crmm import _lib
loader = importlib.machinery.ExtensionFileLoader("crmm._fastalloc", sys.argv[1])
ext = importlib.util.module_from_spec(importlib.util.spec_from_file_location("crmm._fastalloc", sys.argv[1], loader=loader))
loader.exec_module(ext)
addr = lambda f: ctypes.cast(f, ctypes.c_void_p).value
lib = _lib.lib
ext.bind(*[addr(getattr(lib, "crmm_device_buffer_" + n)) for n in ("create", "destroy", "ptr", "size", "device")], _lib.check)
"""

ZERO_SCRIPT = BOUND_EXTENSION + """calls, results = [], {"memset": 0, "sync": 0}

@ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p)
def fake_memset(ptr, value, count, cuda_stream):  # the memory is host memory here
    calls.append(("memset", value, count, cuda_stream))
    if results["memset"] == 0:
        ctypes.memset(ptr, value, count)
    return results["memset"]

@ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
def fake_sync(stream):
    calls.append(("sync", stream))
    return results["sync"]

def memset_failed(err):
    raise crmm.CudaError("memset failed with %d" % err)

ext.bind_zero(addr(lib.crmm_cuda_device_enter), addr(lib.crmm_cuda_device_restore), addr(fake_memset), addr(fake_sync), memset_failed)

class Dirty(t.HostAsDevice):  # memory full of 0xAB, as reused memory may be
    def _allocate(self, n, stream, arg):
        p = super()._allocate(n, stream, arg)
        ctypes.memset(p, 0xAB, n)
        return p

host = Dirty()
stream = t.PER_THREAD_DEFAULT_STREAM._cstream
buf = ext.create_zeroed(4096, stream, host.mr._handle, 99, True)
assert ctypes.string_at(buf.ptr(), 4096) == bytes(4096)
assert calls == [("memset", 0, 4096, 99), ("sync", stream)], calls
calls.clear()
buf2 = ext.create_zeroed(16, stream, host.mr._handle, None, False)
assert calls == [("memset", 0, 16, None)], calls
calls.clear()
assert ext.create_zeroed(0, None, host.mr._handle, None, True).size() == 0 and calls == []
del buf, buf2
assert host.live == {}
for which, code, error in (("memset", 2, "memset failed with 2"), ("sync", 4, "CUDA")):
    results[which] = code
    try:
        ext.create_zeroed(4096, None, host.mr._handle, None, True)
        raise SystemExit("no error")
    except crmm.CudaError as e:
        assert error in str(e), str(e)
    results[which] = 0
    assert host.live == {}, which
print("ok")
"""


def test_extension_zero_fill_fills_synchronizes_and_frees_on_failure(ext, tmp_path):
    """The extension's create_zeroed with stand-ins for cudaMemsetAsync and the stream
    synchronization (no GPU here): the memory is filled with zeros on the given stream, the stream
    synchronized only when asked, and a failure of either raises with the buffer freed."""
    script = tmp_path / "zero.py"
    script.write_text(ZERO_SCRIPT)
    done = subprocess.run([sys.executable, str(script), ext.__file__, os.path.dirname(__file__)],
                          env=dict(os.environ, CRMM_FASTALLOC="off"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


def test_extension_zero_fill_refuses_bad_arguments(ext, host):
    for args, error in (((16, None, host.mr._handle, "s", True), TypeError),
                        ((16, None, host.mr._handle, None), TypeError),
                        ((-1, None, host.mr._handle, None, True), ValueError)):
        with pytest.raises(error):
            ext.create_zeroed(*args)
    assert host.live == {}


@pytest.fixture
def ext():
    if _alloc.extension is None:
        pytest.skip("crmm._fastalloc is not built here")
    return _alloc.extension


@pytest.mark.parametrize("args, error", [
    ((), TypeError), ((16, None), TypeError), ((16, None, None, None), TypeError),
    (("16", None, None), TypeError), ((16.0, None, None), TypeError), ((False, None, None), TypeError),
    ((-1, None, None), ValueError), ((1 << 64, None, None), OverflowError),
    ((16, "stream", None), TypeError), ((16, -1, None), OverflowError), ((16, 1 << 64, None), OverflowError),
    ((16, None, 1.5), TypeError), ((16, None, True), TypeError),
])
def test_extension_create_refuses_bad_arguments(ext, args, error):
    with pytest.raises(error):
        ext.create(*args)


def test_extension_create_raises_the_package_error(ext, host):
    with pytest.raises(crmm.OutOfMemoryError, match="callback"):
        ext.create(LIMIT + 1, None, host.mr._handle)
    host_only = crmm.mr.HostMemoryResource()
    with pytest.raises(crmm.InvalidArgumentError, match="not device accessible"):
        ext.create(16, None, host_only._handle)


def test_extension_buffer_frees_once_and_refuses_use_after(ext, host):
    buf = ext.create(4096, None, host.mr._handle)
    assert buf.size() == 4096 and buf.ptr() in host.live and buf.device() == callback_device()
    assert buf.address == buf._as_parameter_ != 0
    buf.free()
    assert host.live == {} and buf.address == 0
    buf.free()  # a second free does nothing
    for fn in (buf.ptr, buf.size, buf.device):
        with pytest.raises(ValueError, match="freed"):
            fn()


def test_extension_buffers_are_made_only_by_the_extension(ext):
    with pytest.raises(TypeError):
        ext.Buffer()


@pytest.mark.parametrize("arg, error", [(0, ValueError), (-1, OverflowError), ("x", TypeError), (None, ValueError)])
def test_extension_adopt_refuses_non_addresses(ext, arg, error):
    with pytest.raises((error, TypeError)):
        ext.adopt(arg)


TRY_SCRIPT = BOUND_EXTENSION + """TRY_CREATE = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
TRY_DESTROY = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p)
real_create = TRY_CREATE(addr(lib.crmm_device_buffer_try_create))
real_destroy = TRY_DESTROY(addr(lib.crmm_device_buffer_try_destroy))
calls, serve = [], {"create": True, "destroy": True}

@TRY_CREATE
def try_create(size, stream, mr, out):
    calls.append(("create", size))
    return serve["create"] and real_create(size, stream, mr, out)

@TRY_DESTROY
def try_destroy(buf):
    calls.append(("destroy",))
    return serve["destroy"] and real_destroy(buf)

for bad, error in (((1,), TypeError), ((0, addr(try_destroy)), ValueError), (("x", 1), TypeError)):
    try:
        ext.bind_nowait(*bad)
        raise SystemExit("bind_nowait took %r" % (bad,))
    except error:
        pass
ext.bind_nowait(addr(try_create), addr(try_destroy))
ext.bind_nowait(addr(try_create), addr(try_destroy))  # the same again: nothing changes
try:
    ext.bind_nowait(addr(try_destroy), addr(try_create))
    raise SystemExit("bound twice")
except RuntimeError as e:
    assert "another libcrmm" in str(e), e

host = t.HostAsDevice()
pool = t.MemoryResource("pool", {"initial_size": 1 << 20}, upstream=host.mr)
stats = t.StatisticsResourceAdaptor(pool)
def live():
    return stats.allocation_counts.current_count

buf = ext.create(4096, None, pool._handle)  # served at once by the pool
assert calls == [("create", 4096)] and buf.size() == 4096 and len(host.live) == 1, calls
del buf
assert calls[-1] == ("destroy",), calls
for which in ("create", "destroy"):  # refused: the ordinary call does it, with the same result
    serve[which] = False
    calls.clear()
    buf = ext.create(4096, None, stats._handle)
    assert live() == 1 and buf.ptr() != 0
    del buf
    assert live() == 0 and calls == [("create", 4096), ("destroy",)], calls
    serve[which] = True
try:  # a request the pool cannot give: tried, then the ordinary call raises
    calls.clear()
    ext.create(1 << 40, None, pool._handle)
    raise SystemExit("no error")
except MemoryError:
    assert calls == [("create", 1 << 40)], calls
del pool, stats
print("ok")
"""


def test_extension_tries_the_calls_that_never_wait_first(ext, tmp_path):
    """bind_nowait: every create and destroy first goes to libcrmm's try_create / try_destroy
    (with the GIL held); what they refuse is done by the ordinary calls with the same result, and
    bad or second bindings are refused."""
    script = tmp_path / "nowait.py"
    script.write_text(TRY_SCRIPT)
    env = dict(os.environ, CRMM_FASTALLOC="off")
    done = subprocess.run([sys.executable, str(script), ext.__file__, os.path.dirname(__file__)],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_extension_binds_to_one_libcrmm_only(ext):
    lib = crmm._lib.lib
    addr = [ctypes.cast(getattr(lib, "crmm_device_buffer_" + n), ctypes.c_void_p).value
            for n in ("create", "destroy", "ptr", "size", "device")]
    ext.bind(*addr, crmm._lib.check)  # the same library again: nothing changes
    with pytest.raises(RuntimeError, match="another libcrmm"):
        ext.bind(addr[0] + 16, *addr[1:], crmm._lib.check)
    with pytest.raises(TypeError):
        ext.bind(*addr, "not callable")
    with pytest.raises(ValueError):
        ext.bind(0, *addr[1:], crmm._lib.check)
    with pytest.raises(TypeError):
        ext.bind(*addr)


RESIZE_THREADS_SCRIPT = """
import ctypes, threading
import crmm.mr as mr
from crmm.pylibrmm.device_buffer import DeviceBuffer
libc = ctypes.CDLL(None)
address = lambda f: ctypes.cast(f, ctypes.c_void_p).value
# page-aligned host memory that libcrmm is told is device memory, freed by free(): C alone, so
# the calls below run without the GIL all the way down
res = mr.StatisticsResourceAdaptor(
    mr.MemoryResource("callback", {"allocate_fn": address(libc.valloc), "deallocate_fn": address(libc.free)}))
buf = DeviceBuffer._uninitialized(0, mr=res)
errors = []
def work(i):
    try:  # the size stays 0: nothing to copy, so no CUDA is needed
        for k in range(2000):
            buf.reserve(buf.capacity() + 256)
            if k % 7 == i:
                buf.shrink_to_fit()
            if k % 11 == i:
                buf.resize(0)
    except BaseException as e:
        errors.append(e)
threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
assert not errors, errors
counts = res.allocation_counts
assert counts.current_count == 1, counts.current_count
assert counts.current_bytes == buf.capacity(), (counts.current_bytes, buf.capacity())
del buf
assert res.allocation_counts.current_count == 0
print("ok")
"""


def test_threads_resizing_one_buffer_take_turns():
    """resize, reserve and shrink_to_fit replace a buffer's memory and run without the GIL: four
    threads doing them to one buffer must take turns (as RMM's, under the GIL), leaving one live
    block of the buffer's capacity and nothing freed twice (which aborted the process)."""
    done = subprocess.run([sys.executable, "-c", RESIZE_THREADS_SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "ok\n"
