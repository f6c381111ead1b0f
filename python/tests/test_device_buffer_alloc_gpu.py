"""DeviceBuffer and crmm's CuPy allocator on a GPU through both implementations of their
allocate and free (crmm._fastalloc and ctypes, crmm/_alloc.py): the same contents, frees and
streams. The suite runs with the extension where it is built; the DeviceBuffer GPU tests run once
more here with ctypes alone ($CRMM_FASTALLOC=off)."""

import os
import pickle
import subprocess
import sys

import pytest

import crmm
import crmm.mr as mr
from conftest import framework
from crmm import _alloc
from crmm.pylibrmm.stream import DEFAULT_STREAM, Stream

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(params=["extension", "ctypes"])
def backend(request, gpu):
    if request.param == "extension" and _alloc.extension is None:
        pytest.skip("crmm._fastalloc is not built here")
    before = _alloc.use(request.param)
    yield request.param
    _alloc.use(before)


@pytest.fixture
def stats():
    """The current device's resource, counted, for the length of a test."""
    old = mr.get_current_device_resource()
    counted = mr.StatisticsResourceAdaptor(mr.CudaMemoryResource())
    mr.set_current_device_resource(counted)
    yield counted
    mr.set_current_device_resource(old)


def test_buffers_are_zero_filled_pickle_and_copy(backend, stats):
    for size in (1, 4096, 1 << 20):
        db = crmm.DeviceBuffer(size=size)
        assert not db.copy_to_host().any()
        db.copy_from_host(b"\x07" * min(size, 3))
        assert bytes(pickle.loads(pickle.dumps(db))) == bytes(db) == bytes(db.copy())
    del db
    assert stats.query("bytes_in_use") == 0


def test_zero_fill_of_reused_memory_is_ordered_on_the_stream(backend):
    """DeviceBuffer(size=n) does not wait for its fill: a pool hands the block of a buffer just
    filled with 0x5A back at once, and a copy queued on the same stream still reads zeros."""
    pool = mr.PoolMemoryResource(mr.CudaMemoryResource(), initial_pool_size=1 << 20)
    for stream in (DEFAULT_STREAM, Stream()):
        for _ in range(50):
            dirty = crmm.DeviceBuffer(size=65536, stream=stream, mr=pool)
            dirty.copy_from_host(b"\x5a" * 65536, stream=stream)
            where = dirty.ptr
            del dirty
            db = crmm.DeviceBuffer(size=65536, stream=stream, mr=pool)
            assert db.ptr == where  # the same block, its old bytes still there before the fill
            assert not db.copy_to_host(stream=stream).any()
            del db
        stream.synchronize()


def test_create_and_drop_leaves_nothing_outstanding(backend, stats):
    s = Stream()
    for i in range(2000):
        crmm.DeviceBuffer._uninitialized(4096, stream=s if i % 2 else DEFAULT_STREAM)
    s.synchronize()
    assert stats.query("bytes_in_use") == 0
    assert stats.query("allocations_total") == 2000


def _owner(array):
    """The DeviceBuffer behind a CuPy array's UnownedMemory (CuPy 13 names it owner, 14 _owner)."""
    mem = array.data.mem
    return getattr(mem, "owner", None) or mem._owner


def test_cupy_allocator_frees_every_array_on_its_stream(backend, stats):
    cupy = framework("cupy")
    from crmm.allocators.cupy import rmm_cupy_allocator

    cupy.cuda.set_allocator(rmm_cupy_allocator)
    try:
        a = cupy.arange(1000, dtype=cupy.int64)
        assert int(a.sum()) == 999 * 1000 // 2
        assert _owner(a).stream.handle == 0
        with cupy.cuda.Stream(non_blocking=True) as cs:
            b = cupy.ones(1000, dtype=cupy.int32)
            assert _owner(b).stream.handle == cs.ptr
            assert int(b.sum()) == 1000
        cs.synchronize()
        for _ in range(500):
            cupy.empty(4096, cupy.uint8)
        del a, b
        cupy.cuda.Device().synchronize()
        assert stats.query("bytes_in_use") == 0
    finally:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)


def test_cupy_memory_owns_its_buffer_and_hands_it_to_its_owner(backend, stats):
    """On a default stream the extension's allocator hands CuPy its own BaseMemory subclass,
    which owns the buffer: `_owner` is a DeviceBuffer made on first read (the same object after),
    the memory stays allocated while that owner lives, and is freed with the last of the two."""
    cupy = framework("cupy")
    from crmm.allocators.cupy import rmm_cupy_allocator

    if _alloc.extension is None or backend != "extension":
        pytest.skip("the C allocator's memory type is the extension's")
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    try:
        a = cupy.arange(1000, dtype=cupy.int64)
        mem = a.data.mem
        assert type(mem).__name__ == "CupyMemory" and isinstance(mem, cupy.cuda.memory.BaseMemory)
        assert mem.size == 8000 and mem.ptr == a.data.ptr and mem.device_id == cupy.cuda.Device().id
        # CuPy's fields were found: written directly, the MemoryPointer made without a call
        assert _alloc.extension.cupy_layout() == (True, True)
        assert type(a.data) is cupy.cuda.memory.MemoryPointer and a.data.mem is mem
        assert a.data.device_id == mem.device_id and (a.data + 8).ptr == mem.ptr + 8
        owner = mem._owner
        assert type(owner) is crmm.DeviceBuffer and owner is mem._owner and owner is mem.owner
        assert owner.ptr == mem.ptr and owner.size == 8000 and owner.stream.handle == 0
        del a, mem
        assert int(cupy.asarray(owner).view(cupy.int64).sum()) == 999 * 1000 // 2  # still allocated
        assert stats.query("bytes_in_use") == 8000
        del owner
        b = cupy.ones(4096, cupy.uint8)  # never asked for its owner
        assert int(b.sum()) == 4096
        del b
        cupy.cuda.Device().synchronize()
        assert stats.query("bytes_in_use") == 0
    finally:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)


def test_device_buffer_gpu_tests_pass_through_ctypes(gpu):
    """test_device_buffer_gpu.py (copies, streams, pickling, resize, errors) and the CuPy test,
    in a fresh process whose DeviceBuffers allocate through ctypes."""
    if _alloc.extension is None:
        pytest.skip("the suite itself runs through ctypes here")
    env = dict(os.environ, CRMM_FASTALLOC="off", PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x",
         os.path.join(HERE, "test_device_buffer_gpu.py"),
         os.path.join(HERE, "test_frameworks_gpu.py") + "::test_cupy_arrays_in_crmm_memory"],
        cwd=HERE, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
