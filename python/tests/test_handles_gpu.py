"""copy and pickle of the device objects: a new Stream and a CudaStreamPool (which own CUDA
streams) and a DeviceBuffer (which pickles to host bytes, as RMM's)."""

import copy
import gc
import pickle

import pytest

import crmm
from crmm.pylibrmm.cuda_stream_pool import CudaStreamPool
from crmm.pylibrmm.stream import Stream

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
def test_a_copied_stream_keeps_the_stream_alive(gpu, how):
    s = Stream()
    handle = s.handle
    twin = how(s)
    del s
    gc.collect()
    assert twin.handle == handle
    twin.synchronize()
    db = crmm.DeviceBuffer.to_device(b"abc", stream=twin)
    twin.synchronize()
    assert db.tobytes() == b"abc"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_new_stream_refuses_pickling(gpu, protocol):
    s = Stream()
    with pytest.raises(TypeError, match="cannot pickle Stream"):
        pickle.dumps(s, protocol=protocol)
    s.synchronize()


def test_a_second_init_of_a_stream_or_pool_is_refused_and_keeps_its_streams(gpu):
    s, pool = Stream(), CudaStreamPool(pool_size=2)
    handle, first = s.handle, pool.get_stream(0).handle
    with pytest.raises(crmm.StateError, match="already made"):
        s.__init__()
    with pytest.raises(crmm.StateError, match="already made"):
        pool.__init__(pool_size=4)
    assert s.handle == handle and pool.get_pool_size() == 2 and pool.get_stream(0).handle == first
    db = crmm.DeviceBuffer.to_device(b"abc", stream=s)
    s.synchronize()
    assert db.tobytes() == b"abc"


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
def test_a_stream_pool_refuses_copies(gpu, how):
    pool = CudaStreamPool(2)
    with pytest.raises(TypeError, match="CudaStreamPool"):
        how(pool)
    assert pool.get_pool_size() == 2
    pool.get_stream().synchronize()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_stream_pool_refuses_pickling(gpu, protocol):
    pool = CudaStreamPool(2)
    with pytest.raises(TypeError, match="cannot pickle CudaStreamPool"):
        pickle.dumps(pool, protocol=protocol)
    with pytest.raises(TypeError, match="cannot pickle Stream"):
        pickle.dumps(pool.get_stream(0), protocol=protocol)
    pool.get_stream(1).synchronize()


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
def test_a_copied_device_buffer_is_a_new_buffer(gpu, how):
    db = crmm.DeviceBuffer.to_device(b"hello")
    twin = how(db)
    assert twin.ptr != db.ptr and twin.tobytes() == b"hello"
    del twin
    gc.collect()
    assert db.tobytes() == b"hello"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_device_buffer_pickles_to_its_bytes(gpu, protocol):
    db = crmm.DeviceBuffer.to_device(b"hello")
    back = pickle.loads(pickle.dumps(db, protocol=protocol))
    assert isinstance(back, crmm.DeviceBuffer) and back.ptr != db.ptr
    assert back.tobytes() == b"hello" and db.tobytes() == b"hello"


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
def test_a_copied_device_resource_holds_its_own_reference(gpu, how):
    from crmm._lib import lib

    res = crmm.mr.CudaMemoryResource()
    before = lib.crmm_resource_refcount(res.ptr)
    twin = how(res)
    assert lib.crmm_resource_refcount(res.ptr) == before + 1
    del twin
    gc.collect()
    assert lib.crmm_resource_refcount(res.ptr) == before
    res.deallocate(res.allocate(256), 256)


def test_protocol_5_hands_the_contents_out_of_band(gpu):
    db = crmm.DeviceBuffer.to_device(b"out of band")
    buffers = []
    data = pickle.dumps(db, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and bytes(buffers[0].raw()) == b"out of band"
    assert b"out of band" not in data
    back = pickle.loads(data, buffers=buffers)
    assert back.tobytes() == b"out of band"


def test_cuda_array_interface_is_rmm_s(gpu):
    db = crmm.DeviceBuffer(size=16)
    iface = db.__cuda_array_interface__
    assert iface == {"data": (db.ptr, False), "shape": (16,), "strides": None, "typestr": "|u1", "version": 0}


def device_resources():
    cuda = crmm.mr.CudaMemoryResource()
    return [
        cuda,
        crmm.mr.ManagedMemoryResource(),
        crmm.mr.PinnedHostMemoryResource(),
        crmm.mr.CudaAsyncMemoryResource(),
        crmm.mr.PoolMemoryResource(cuda, initial_pool_size="4MiB"),
        crmm.mr.ArenaMemoryResource(cuda, arena_size="4MiB"),
        crmm.mr.BinningMemoryResource(cuda, 10, 12),
        crmm.mr.PrefetchResourceAdaptor(crmm.mr.ManagedMemoryResource()),
        crmm.mr.FailureCallbackResourceAdaptor(cuda, lambda n: False),
        crmm.mr.get_current_device_resource(),
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_device_resource_copies_with_a_reference_and_refuses_pickling(gpu, protocol):
    from crmm._lib import lib

    for res in device_resources():
        before = lib.crmm_resource_refcount(res.ptr)
        with pytest.raises(TypeError, match="cannot pickle"):
            pickle.dumps(res, protocol=protocol)
        for how in (copy.copy, copy.deepcopy):
            twin = how(res)
            assert type(twin) is type(res) and lib.crmm_resource_refcount(res.ptr) == before + 1
            del twin
            gc.collect()
        assert lib.crmm_resource_refcount(res.ptr) == before
        res.deallocate(res.allocate(256), 256)
