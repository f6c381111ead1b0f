"""Objects used after their C object is gone, and memory freed twice (no device needed): a
clear Python exception, never a call into libcrmm with a dangling or NULL handle."""

import copy

import pytest

import crmm
import crmm.mr as mr
from crmm._errors import StateError
from crmm.pylibrmm.cuda_stream_pool import CudaStreamPool
from crmm.pylibrmm.device_buffer import DeviceBuffer
from crmm.pylibrmm.stream import Stream
from test_device_buffer_alloc import HostAsDevice


def released(res):
    res.__del__()
    assert res.ptr is None
    return res


USES = {
    "allocate": lambda r: r.allocate(8),
    "deallocate": lambda r: r.deallocate(0, 0),
    "query": lambda r: r.query("bytes_in_use"),
    "trim": lambda r: r.trim(),
    "kind": lambda r: r.kind,
    "name": lambda r: r.name,
    "is_host_accessible": lambda r: r.is_host_accessible,
    "allocation_counts": lambda r: r.allocation_counts,
    "as an upstream": lambda r: mr.StatisticsResourceAdaptor(r),
    "as a buffer's resource": lambda r: DeviceBuffer(size=8, mr=r),
}


@pytest.mark.parametrize("use", USES.values(), ids=USES.keys())
def test_a_released_resource_raises_state_error(use):
    res = released(mr.StatisticsResourceAdaptor(mr.HostMemoryResource()))
    with pytest.raises(StateError, match="released"):
        use(res)


def test_releasing_twice_is_harmless():
    res = released(mr.HostMemoryResource())
    res.__del__()


def test_a_released_resource_cannot_become_a_device_s_resource():
    res = released(mr.HostMemoryResource())
    with pytest.raises(StateError):
        mr.set_per_device_resource(0, res)


def test_a_freed_device_buffer_raises_state_error():
    db = DeviceBuffer.__new__(DeviceBuffer)
    db._buf = None
    for use in (lambda: db.ptr, lambda: db.size, lambda: db.resize(4), lambda: db.copy(), lambda: db.tobytes()):
        with pytest.raises(StateError, match="freed"):
            use()


def test_repr_of_a_released_resource_or_freed_buffer_says_so():
    """repr is what tracebacks, loggers and debuggers show: it says the object is gone rather
    than raising StateError."""
    res = released(mr.StatisticsResourceAdaptor(mr.HostMemoryResource()))
    assert repr(res) == "<crmm StatisticsResourceAdaptor (released)>"
    assert "released" in repr([res])
    db = DeviceBuffer.__new__(DeviceBuffer)
    assert repr(db) == "<crmm DeviceBuffer (freed)>"
    db._buf = None
    assert repr(db) == "<crmm DeviceBuffer (freed)>"


@pytest.mark.parametrize("make", [mr.HostMemoryResource, lambda: mr.TrackingResourceAdaptor(mr.HostMemoryResource())], ids=["host", "tracking"])
def test_memory_freed_twice_is_refused(make):
    res = make()
    p = res.allocate(64)
    res.deallocate(p, 64)
    with pytest.raises(crmm.InvalidArgumentError):
        res.deallocate(p, 64)
    with pytest.raises(crmm.InvalidArgumentError):
        res.deallocate(0x1000, 64)


def test_a_resource_released_by_hand_leaves_the_registry():
    """A resource made later at the address of one released by hand (the object still alive) is
    the object found for that address, not a second one."""
    from crmm._lib import lib
    from crmm.pylibrmm.memory_resource import _memory_resource as registry

    host = mr.HostMemoryResource()
    gone = {}
    for _ in range(50):
        res = mr.StatisticsResourceAdaptor(host)
        ptr = res.ptr
        gone[ptr] = released(res)
        assert registry._objects.get(ptr) is None
    # a new resource at a released one's address (glibc's malloc reuses it at once)
    for _ in range(200):
        res = mr.StatisticsResourceAdaptor(host)
        if res.ptr in gone:
            assert registry._objects.get(res.ptr) is res
            assert mr.MemoryResource._adopt(lib.crmm_resource_retain(res.ptr)) is res
            break
    else:  # a malloc that never reuses an address (a sanitizer's, which quarantines frees)
        pytest.skip("no new resource was made at a released one's address: nothing to check here")



def released_stream():
    """A view of a caller's CUDA stream (made without a device: no CUDA call), released by hand."""
    stream = Stream(0x5000)
    stream.__del__()
    return stream


# host memory that libcrmm takes for device memory (a DeviceBuffer without a device); kept for
# the whole module, as its callbacks must outlive the buffers made from it
DEVICE_MEMORY = HostAsDevice()


def empty_buffer():
    return DeviceBuffer(size=0, mr=DEVICE_MEMORY.mr)


STREAM_USES = {
    "allocate": lambda s: mr.HostMemoryResource().allocate(8, s),
    "deallocate": lambda s: mr.HostMemoryResource().deallocate(0, 0, s),
    "handle": lambda s: s.handle,
    "__cuda_stream__": lambda s: s.__cuda_stream__(),
    "is_default": lambda s: s.is_default(),
    "synchronize": lambda s: s.synchronize(),
    "a new buffer": lambda s: DeviceBuffer(size=0, mr=DEVICE_MEMORY.mr, stream=s),
    "to_device": lambda s: DeviceBuffer.to_device(b"", stream=s),
    "copy_to_host": lambda s: empty_buffer().copy_to_host(stream=s),
    "copy_from_host": lambda s: empty_buffer().copy_from_host(b"", stream=s),
    "resize": lambda s: empty_buffer().resize(0, stream=s),
    "a view of it": Stream,
    "copy": copy.copy,
}


@pytest.mark.parametrize("use", STREAM_USES.values(), ids=STREAM_USES.keys())
def test_a_released_stream_raises_state_error(use):
    """Work on a released stream is refused, never queued on the default stream instead."""
    with pytest.raises(StateError, match="released"):
        use(released_stream())


@pytest.mark.parametrize("change", ["resize", "reserve", "shrink_to_fit"])
def test_a_buffer_keeps_its_stream_when_given_a_released_one(change):
    """A resize refused for its released stream leaves the buffer's stream (where its memory is
    freed) the one it had."""
    buf = empty_buffer()
    before = buf.stream
    args = () if change == "shrink_to_fit" else (0,)
    with pytest.raises(StateError, match="released"):
        getattr(buf, change)(*args, stream=released_stream())
    assert buf.stream is before


def test_a_view_of_a_stream_released_later_raises_state_error():
    """A view shares its original's CUDA stream: once the original destroyed it, the view is
    refused too rather than handing libcrmm the stream object that is gone."""
    original = Stream(0x5000)
    view = Stream(original)
    original.__del__()
    with pytest.raises(StateError, match="released"):
        mr.HostMemoryResource().allocate(8, view)


def test_releasing_a_stream_twice_is_harmless():
    released_stream().__del__()


def test_repr_of_a_released_stream_says_so():
    assert repr(released_stream()) == "<crmm Stream (released)>"


def released_pool():
    """A CudaStreamPool as its __del__ leaves it (making a pool needs a device)."""
    pool = CudaStreamPool.__new__(CudaStreamPool)
    pool._pool = None
    return pool


@pytest.mark.parametrize("use", [lambda p: p.get_pool_size(), lambda p: p.get_stream(), lambda p: p.get_stream(0)],
                         ids=["get_pool_size", "get_stream", "get_stream(id)"])
def test_a_released_stream_pool_raises_state_error(use):
    with pytest.raises(StateError, match="released"):
        use(released_pool())
