"""DeviceBuffer, the copies, streams and resources on a GPU."""

import numpy as np
import pytest

import crmm as rmm
import crmm.mr as mr
from crmm._errors import StateError
from crmm.pylibrmm.cuda_stream_pool import CudaStreamPool
from crmm.pylibrmm.device_buffer import copy_device_to_ptr, copy_ptr_to_host
from crmm.pylibrmm.stream import CudaStreamFlags, Stream


def test_new_buffers_are_zero(gpu):
    for size in (1, 5, 1000, 1 << 20):
        assert not rmm.DeviceBuffer(size=size).copy_to_host().any()


def test_properties_and_bytes(gpu):
    db = rmm.DeviceBuffer.to_device(b"hello")
    assert db.size == db.nbytes == len(db) == 5
    assert db.capacity() >= 5 and db.ptr != 0
    assert bytes(db) == db.tobytes() == b"hello"
    iface = db.__cuda_array_interface__
    assert iface["data"] == (db.ptr, False) and iface["shape"] == (5,) and iface["typestr"] == "|u1"
    assert rmm.DeviceBuffer(size=0).ptr == 0


def test_resize_reserve_shrink_keep_contents(gpu):
    db = rmm.DeviceBuffer.to_device(b"abcdef")
    db.reserve(100)
    assert db.capacity() >= 100 and db.size == 6 and bytes(db) == b"abcdef"
    db.resize(3)
    assert db.size == 3 and bytes(db) == b"abc"
    db.shrink_to_fit()
    assert db.capacity() == 3 and bytes(db) == b"abc"
    db.resize(10)
    assert db.size == 10 and bytes(db)[:3] == b"abc"


def test_copy_from_host_and_device(gpu):
    db = rmm.DeviceBuffer(size=8)
    db.copy_from_host(np.arange(4, dtype=np.uint8))
    assert bytes(db) == b"\0\1\2\3\0\0\0\0"
    src = rmm.DeviceBuffer.to_device(b"xyz")
    db.copy_from_device(src)
    assert bytes(db)[:4] == b"xyz\3"
    with pytest.raises(ValueError):
        db.copy_from_host(b"123456789")
    out = bytearray(8)
    assert db.copy_to_host(out) is out and bytes(out) == bytes(db)
    with pytest.raises(ValueError):
        db.copy_to_host(bytearray(2))


def test_ptr_constructor_and_copy_are_deep(gpu):
    src = rmm.DeviceBuffer.to_device(b"data")
    a = rmm.DeviceBuffer(ptr=src.ptr, size=4)
    b = src.copy()
    src.copy_from_host(b"XXXX")
    assert bytes(a) == b"data" and bytes(b) == b"data" and a.ptr != src.ptr


def test_copies_on_a_non_blocking_stream(gpu):
    s = Stream(flags=CudaStreamFlags.NON_BLOCKING)
    assert not s.is_default()
    payload = np.arange(256, dtype=np.uint8).tobytes() * 64
    db = rmm.pylibrmm.device_buffer.to_device(payload, stream=s)
    other = rmm.DeviceBuffer(size=len(payload), stream=s)
    copy_device_to_ptr(db.ptr, other.ptr, len(payload), stream=s)
    host = bytearray(len(payload))
    copy_ptr_to_host(other.ptr, host, stream=s)
    s.synchronize()
    assert bytes(host) == payload


def test_stream_pool_hands_out_its_streams(gpu):
    pool = CudaStreamPool(pool_size=4)
    assert pool.get_pool_size() == 4
    handles = {pool.get_stream(i).handle for i in range(4)}
    assert len(handles) == 4 and 0 not in handles
    assert pool.get_stream(5).handle == pool.get_stream(1).handle
    assert pool.get_stream(-1).handle == pool.get_stream(3).handle
    s = pool.get_stream()
    assert bytes(rmm.DeviceBuffer.to_device(b"ok", stream=s)) == b"ok"


def test_stream_pool_takes_numpy_integers_as_rmm_s_size_t_does(gpu):
    pool = CudaStreamPool(pool_size=np.int64(3))
    assert pool.get_pool_size() == 3
    assert pool.get_stream(np.uint8(4)).handle == pool.get_stream(1).handle
    for bad in (True, 2.0, "2"):
        with pytest.raises(TypeError, match="pool_size must be an int"):
            CudaStreamPool(pool_size=bad)
        with pytest.raises(TypeError, match="stream_id must be an int or None"):
            pool.get_stream(bad)


def test_a_stream_of_a_released_pool_raises_state_error(gpu):
    """The pool's streams are destroyed with it: a Stream it handed out is refused afterwards
    rather than handing libcrmm a stream object that is gone."""
    pool = CudaStreamPool(pool_size=2)
    s = pool.get_stream()
    pool.__del__()
    with pytest.raises(StateError, match="released"):
        s.synchronize()
    with pytest.raises(StateError, match="released"):
        rmm.DeviceBuffer(size=8, stream=s)


def test_buffers_come_from_the_current_resource(gpu):
    old = mr.get_current_device_resource()
    stats = mr.StatisticsResourceAdaptor(mr.PoolMemoryResource(mr.CudaMemoryResource(), initial_pool_size="16MiB"))
    mr.set_current_device_resource(stats)
    try:
        assert mr.get_current_device_resource() == stats
        db = rmm.DeviceBuffer(size=1000)
        assert db.mr == stats
        assert stats.query("bytes_in_use") == 1000
        del db
        assert stats.query("bytes_in_use") == 0
    finally:
        mr.set_current_device_resource(old)
    assert mr.get_current_device_resource() == old


def test_explicit_resource_and_out_of_memory(gpu):
    lim = mr.LimitingResourceAdaptor(mr.CudaMemoryResource(), allocation_limit=1 << 20)
    db = rmm.DeviceBuffer(size=1000, mr=lim)
    assert db.mr == lim
    with pytest.raises(MemoryError):
        rmm.DeviceBuffer(size=2 << 20, mr=lim)
    with pytest.raises(MemoryError):
        rmm.DeviceBuffer(size=1 << 50)


def test_per_device_resource(gpu):
    r = mr.get_per_device_resource(0)
    assert r.is_device_accessible
    with pytest.raises(rmm.InvalidArgumentError):
        mr.get_per_device_resource(1 << 20)


def test_logging_switch_writes_csv(gpu, tmp_path):
    rmm.enable_logging(str(tmp_path / "log.csv"))
    try:
        names = rmm.get_log_filenames()
        assert names and all(".dev" in n for n in names.values())
        rmm.DeviceBuffer(size=4096)
    finally:
        rmm.disable_logging()
    text = "".join(open(n).read() for n in names.values())
    assert "allocate" in text and "4096" in text
