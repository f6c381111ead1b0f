"""On a GPU: RMM's resources over memory crmm does not own serve device buffers, are what they
were set as, and say clearly what the device lacks."""

import numpy as np
import pytest

import crmm
import crmm.mr as mr


@pytest.fixture
def restore(gpu):
    before = mr.get_current_device_resource()
    yield
    mr.set_current_device_resource(before)


def roundtrip():
    data = np.arange(1000, dtype=np.uint8)
    buf = crmm.DeviceBuffer.to_device(data.tobytes())
    assert bytes(buf.copy_to_host()) == data.tobytes()


def test_a_callback_resource_serves_device_buffers(restore):
    base = mr.CudaMemoryResource()
    calls = []

    def allocate(nbytes, stream):
        calls.append(("allocate", nbytes, stream.handle))
        return base.allocate(nbytes, stream)

    def deallocate(ptr, nbytes, stream):
        calls.append(("deallocate", nbytes, stream.handle))
        base.deallocate(ptr, nbytes, stream)

    cb = mr.CallbackMemoryResource(allocate, deallocate)
    mr.set_current_device_resource(cb)
    assert mr.get_current_device_resource() is cb
    assert type(mr.get_current_device_resource()) is mr.CallbackMemoryResource
    buf = crmm.DeviceBuffer(size=256)
    del buf
    assert [c[:2] for c in calls] == [("allocate", 256), ("deallocate", 256)]
    roundtrip()


@pytest.mark.parametrize("raised, caught", [(MemoryError, MemoryError), (RuntimeError, RuntimeError), (Exception, RuntimeError)])
def test_a_callback_that_raises_fails_the_device_buffer(restore, raised, caught):
    base = mr.CudaMemoryResource()

    def allocate(nbytes, stream):
        raise raised("no memory for you")

    mr.set_current_device_resource(mr.CallbackMemoryResource(allocate, lambda p, n, s: base.deallocate(p, n, s)))
    with pytest.raises(caught, match="no memory for you"):
        crmm.DeviceBuffer(size=256)
    mr.set_current_device_resource(base)
    roundtrip()


def test_a_device_buffer_keeps_its_callback_resource(gpu):
    base = mr.CudaMemoryResource()
    freed = []
    cb = mr.CallbackMemoryResource(lambda n, s: base.allocate(n, s), lambda p, n, s: freed.append(n) or base.deallocate(p, n, s))
    buf = crmm.DeviceBuffer(size=300, mr=cb)
    del cb
    import gc

    gc.collect()
    del buf
    assert freed == [300]


def test_a_view_allocates_from_another_resource_s_pool(restore):
    owner = mr.CudaAsyncMemoryResource()
    handle = owner.pool_handle()
    view = mr.CudaAsyncViewMemoryResource(handle)
    assert view.pool_handle() == handle

    class PoolObject:  # as cuda.bindings' cudaMemPool_t: int() is the handle, getPtr() where it is stored
        def __int__(self):
            return handle

        def getPtr(self):
            return id(self)

    assert mr.CudaAsyncViewMemoryResource(PoolObject()).pool_handle() == handle
    mr.set_current_device_resource(view)
    assert type(mr.get_current_device_resource()) is mr.CudaAsyncViewMemoryResource
    roundtrip()


def test_system_memory_works_or_names_what_the_device_lacks(restore):
    for make in (mr.SystemMemoryResource, lambda: mr.SamHeadroomMemoryResource(headroom=1 << 20)):
        try:
            res = make()
        except crmm.UnsupportedError as e:
            assert "cudaDevAttrPageableMemoryAccess" in str(e)
            continue
        mr.set_current_device_resource(res)
        assert mr.get_current_device_resource() is res
        roundtrip()


def test_async_managed_works_or_says_why(restore):
    try:
        res = mr.experimental.CudaAsyncManagedMemoryResource()
    except crmm.UnsupportedError as e:
        assert "CUDA 13" in str(e) or "memory pools" in str(e)
        return
    except crmm.CudaError as e:  # a driver without a managed pool for the device
        assert "cudaMemGetDefaultMemPool" in str(e)
        return
    assert isinstance(res.pool_handle(), int) and res.pool_handle() != 0
    mr.set_current_device_resource(res)
    assert type(mr.get_current_device_resource()) is mr.experimental.CudaAsyncManagedMemoryResource
    roundtrip()


def test_fabric_that_the_device_lacks_ends_in_rmm_s_words(gpu):
    try:
        mr.CudaAsyncMemoryResource(enable_fabric=True)
    except RuntimeError as e:
        assert str(e).endswith("Requested IPC memory handle type not supported")


def test_a_view_over_a_pool_made_with_cuda_bindings_fails_as_memory_error_once_it_is_destroyed(restore):
    runtime = pytest.importorskip("cuda.bindings.runtime")
    err, device = runtime.cudaGetDevice()
    assert err == runtime.cudaError_t.cudaSuccess
    props = runtime.cudaMemPoolProps()
    props.allocType = runtime.cudaMemAllocationType.cudaMemAllocationTypePinned
    props.location.type = runtime.cudaMemLocationType.cudaMemLocationTypeDevice
    props.location.id = device
    err, pool = runtime.cudaMemPoolCreate(props)
    assert err == runtime.cudaError_t.cudaSuccess
    view = mr.CudaAsyncViewMemoryResource(pool)
    assert view.pool_handle() == int(pool)
    mr.set_current_device_resource(view)
    roundtrip()
    (err,) = runtime.cudaMemPoolDestroy(pool)
    assert err == runtime.cudaError_t.cudaSuccess
    with pytest.raises(MemoryError):
        crmm.DeviceBuffer(size=1024)
