"""RMM's resources over memory crmm does not own, as far as they work without a GPU:
CallbackMemoryResource over host memory (its callbacks, their errors, their lifetime), and the
argument checks of CudaAsyncViewMemoryResource, SamHeadroomMemoryResource and the experimental
CudaAsyncManagedMemoryResource, which come before any CUDA call."""

import gc
import sys
import threading

import numpy as np
import pytest

import crmm
import crmm.mr as mr
from crmm._lib import lib
from crmm.pylibrmm.stream import DEFAULT_STREAM, Stream


class Recorder:
    """Callbacks over a HostMemoryResource that record each call."""

    def __init__(self):
        self.host = mr.HostMemoryResource()
        self.calls = []

    def allocate(self, nbytes, stream):
        self.calls.append(("allocate", nbytes, stream))
        return self.host.allocate(nbytes)

    def deallocate(self, ptr, nbytes, stream):
        self.calls.append(("deallocate", ptr, nbytes, stream))
        self.host.deallocate(ptr, nbytes)


def test_callbacks_get_the_size_the_pointer_and_the_stream():
    rec = Recorder()
    cb = mr.CallbackMemoryResource(rec.allocate, rec.deallocate)
    p = cb.allocate(1000)
    assert p % 256 == 0
    cb.deallocate(p, 1000)
    (a, d) = rec.calls
    assert a[:2] == ("allocate", 1000) and isinstance(a[2], Stream) and a[2].handle == DEFAULT_STREAM.handle
    assert d[:3] == ("deallocate", p, 1000) and isinstance(d[3], Stream)
    assert cb.kind == "callback" and type(cb) is mr.CallbackMemoryResource


def test_the_new_classes_are_their_plugins_classes():
    assert mr.PLUGIN_CLASSES["callback"] is mr.CallbackMemoryResource
    assert mr.PLUGIN_CLASSES["cuda_async_view"] is mr.CudaAsyncViewMemoryResource
    assert mr.PLUGIN_CLASSES["system"] is mr.SystemMemoryResource
    assert mr.PLUGIN_CLASSES["sam_headroom"] is mr.SamHeadroomMemoryResource
    assert mr.PLUGIN_CLASSES["async_managed"] is mr.experimental.CudaAsyncManagedMemoryResource
    import crmm.pylibrmm.memory_resource.experimental as exp

    assert exp.CudaAsyncManagedMemoryResource is mr.experimental.CudaAsyncManagedMemoryResource


def test_an_adaptor_over_a_callback_resource_gives_it_back():
    rec = Recorder()
    cb = mr.CallbackMemoryResource(rec.allocate, rec.deallocate)
    stats = mr.StatisticsResourceAdaptor(cb)
    assert stats.upstream_mr is cb
    assert mr.MemoryResource._adopt(lib.crmm_resource_retain(cb.ptr)) is cb
    p = stats.allocate(512)
    assert stats.allocation_counts.current_bytes == 512
    stats.deallocate(p, 512)
    assert [c[0] for c in rec.calls] == ["allocate", "deallocate"]


@pytest.mark.parametrize(
    "raised, caught",
    [(MemoryError, MemoryError), (RuntimeError, RuntimeError), (ValueError, RuntimeError), (BaseException, RuntimeError)],
)
def test_an_exception_of_the_allocate_callback_is_raised_by_the_allocation(raised, caught):
    rec = Recorder()

    def allocate(nbytes, stream):
        raise raised("the callback refused")

    cb = mr.CallbackMemoryResource(allocate, rec.deallocate)
    with pytest.raises(caught, match="the callback refused") as info:
        cb.allocate(64)
    assert isinstance(info.value, raised) or isinstance(info.value.__cause__, raised)
    assert cb.query("allocations") == 0 and rec.calls == []


@pytest.mark.parametrize("returned, caught", [(None, RuntimeError), ("0x100", RuntimeError), (1.0, RuntimeError), (-256, RuntimeError), (1 << 64, RuntimeError), (True, RuntimeError)])
def test_an_allocate_callback_that_returns_no_address_fails_the_allocation(returned, caught):
    cb = mr.CallbackMemoryResource(lambda n, s: returned, lambda p, n, s: None)
    with pytest.raises(caught):
        cb.allocate(64)
    assert cb.query("bytes_in_use") == 0


def test_an_allocate_callback_may_return_a_numpy_integer():
    rec = Recorder()
    cb = mr.CallbackMemoryResource(lambda n, s: np.uint64(rec.allocate(n, s)), rec.deallocate)
    p = cb.allocate(1000)
    assert type(p) is int and p % 256 == 0
    cb.deallocate(p, 1000)
    assert [c[0] for c in rec.calls] == ["allocate", "deallocate"]
    for refused in (np.bool_(True), np.float64(4096.0)):
        bad = mr.CallbackMemoryResource(lambda n, s, r=refused: r, lambda p, n, s: None)
        with pytest.raises(RuntimeError, match="not an int address"):
            bad.allocate(64)


def test_an_allocate_callback_that_returns_0_is_out_of_memory():
    cb = mr.CallbackMemoryResource(lambda n, s: 0, lambda p, n, s: None)
    with pytest.raises(crmm.OutOfMemoryError, match="returned NULL"):
        cb.allocate(64)


def test_a_misaligned_block_goes_back_and_fails():
    rec = Recorder()
    base = rec.host.allocate(1024)
    freed = []
    cb = mr.CallbackMemoryResource(lambda n, s: base + 8, lambda p, n, s: freed.append((p, n)))
    with pytest.raises(crmm.BadAllocError, match="not aligned"):
        cb.allocate(100)
    assert freed == [(base + 8, 100)]
    rec.host.deallocate(base, 1024)


def test_a_callback_failure_does_not_leak_into_later_calls():
    calls = {"n": 0}
    host = mr.HostMemoryResource()

    def allocate(nbytes, stream):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ValueError("first call fails")
        return host.allocate(nbytes)

    cb = mr.CallbackMemoryResource(allocate, lambda p, n, s: host.deallocate(p, n))
    with pytest.raises(RuntimeError, match="first call fails"):
        cb.allocate(64)
    p = cb.allocate(64)
    cb.deallocate(p, 64)
    limited = mr.LimitingResourceAdaptor(cb, allocation_limit=128)
    with pytest.raises(crmm.OutOfMemoryError) as info:
        limited.allocate(4096)
    assert "first call fails" not in str(info.value)


def test_a_callback_failure_a_pool_recovered_from_is_not_a_later_call_s_error():
    """A pool whose growth the callback refuses asks again for half as much, which the callback
    gives: the allocation succeeds, and the refusal's exception is not raised later by another
    call that fails for its own reason (it was: a bad free became the callback's MemoryError).
    The memory comes from libc, not through a crmm call (which would drop the exception)."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc.aligned_alloc.restype, libc.aligned_alloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t] * 2
    libc.free.argtypes = [ctypes.c_void_p]
    budget = {"used": 0}

    def allocate(nbytes, stream):
        if budget["used"] + nbytes > 6144:
            raise MemoryError(f"the callback refuses {nbytes} bytes")
        budget["used"] += nbytes
        return libc.aligned_alloc(256, nbytes)

    def deallocate(ptr, nbytes, stream):
        budget["used"] -= nbytes
        libc.free(ptr)

    pool = mr.MemoryResource("pool", {"initial_size": 4096}, upstream=mr.CallbackMemoryResource(allocate, deallocate))
    a = pool.allocate(4096)
    b = pool.allocate(256)  # the pool asks for 4096 (refused), then 2048
    assert budget["used"] == 6144
    tracking = mr.TrackingResourceAdaptor(mr.HostMemoryResource())
    with pytest.raises(crmm.InvalidArgumentError, match="did not allocate"):
        tracking.deallocate(0x1000, 64)
    pool.deallocate(b, 256)
    pool.deallocate(a, 4096)


def test_an_exception_of_the_deallocate_callback_is_reported_not_raised(monkeypatch):
    host = mr.HostMemoryResource()
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)

    def deallocate(ptr, nbytes, stream):
        host.deallocate(ptr, nbytes)
        raise KeyError("free failed")

    cb = mr.CallbackMemoryResource(lambda n, s: host.allocate(n), deallocate)
    p = cb.allocate(300)
    cb.deallocate(p, 300)
    assert len(reported) == 1 and isinstance(reported[0].exc_value, KeyError)
    assert cb.query("bytes_in_use") == 0


def test_exceptions_stay_on_the_thread_whose_callback_raised():
    host = mr.HostMemoryResource()

    def allocate(nbytes, stream):
        if threading.current_thread().name == "bad":
            raise ValueError("bad thread")
        return host.allocate(nbytes)

    cb = mr.CallbackMemoryResource(allocate, lambda p, n, s: host.deallocate(p, n))
    results = {}

    def run():
        try:
            p = cb.allocate(256)
            cb.deallocate(p, 256)
            results[threading.current_thread().name] = "ok"
        except RuntimeError as e:
            results[threading.current_thread().name] = str(e)

    threads = [threading.Thread(target=run, name=name) for name in ("good1", "bad", "good2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"good1": "ok", "bad": "bad thread", "good2": "ok"}


def test_the_callbacks_outlive_the_python_object_while_c_holds_the_resource():
    host = mr.HostMemoryResource()
    seen = []

    def make():
        return mr.CallbackMemoryResource(lambda n, s: seen.append(n) or host.allocate(n), lambda p, n, s: host.deallocate(p, n))

    cb = make()
    ptr = lib.crmm_resource_retain(cb.ptr)
    del cb
    gc.collect()
    again = mr.MemoryResource._adopt(ptr)
    assert type(again) is mr.CallbackMemoryResource
    p = again.allocate(128)
    again.deallocate(p, 128)
    assert seen == [128]


@pytest.mark.parametrize("bad", [None, "allocate", 3])
def test_callbacks_must_be_callable(bad):
    with pytest.raises(TypeError, match="callable"):
        mr.CallbackMemoryResource(bad, lambda p, n, s: None)
    with pytest.raises(TypeError, match="callable"):
        mr.CallbackMemoryResource(lambda n, s: 0, bad)


def test_a_released_callback_resource_refuses_use():
    rec = Recorder()
    cb = mr.CallbackMemoryResource(rec.allocate, rec.deallocate)
    cb.__del__()
    with pytest.raises(crmm.CrmmError, match="released"):
        cb.allocate(8)
    assert rec.calls == []


@pytest.mark.parametrize("bad", [None, 0, True, "pool", -1, 1 << 64, object(), 1.5])
def test_a_view_needs_a_pool_handle(bad):
    with pytest.raises(ValueError, match="pool_handle"):
        mr.CudaAsyncViewMemoryResource(bad)


def test_a_view_takes_a_handle_object_as_cuda_bindings_gives_it():
    class ZeroPool:  # cudaMemPool_t(0): a NULL handle (getPtr() is where it is stored, never 0)
        def __int__(self):
            return 0

        def getPtr(self):
            return id(self)

    with pytest.raises(ValueError, match="not a memory pool"):
        mr.CudaAsyncViewMemoryResource(ZeroPool())


@pytest.mark.parametrize("bad, exc", [("1MiB", TypeError), (1.0, TypeError), (True, TypeError), (-1, ValueError), (1 << 64, OverflowError)])
def test_sam_headroom_needs_a_byte_count(bad, exc):
    with pytest.raises(exc, match="headroom"):
        mr.SamHeadroomMemoryResource(bad)


@pytest.mark.parametrize(
    "make",
    [
        mr.SystemMemoryResource,
        lambda: mr.SamHeadroomMemoryResource(1 << 20),
        lambda: mr.CudaAsyncViewMemoryResource(0x7F0000000000),
        mr.experimental.CudaAsyncManagedMemoryResource,
    ],
)
def test_without_a_device_the_device_resources_say_so(no_gpu, make):
    with pytest.raises(crmm.CudaError, match="needs a CUDA device"):
        make()


def test_callback_resources_alive_at_exit_do_not_crash_it():
    from conftest import run_python

    r = run_python(
        """
        import crmm.mr as mr
        host = mr.HostMemoryResource()
        cb = mr.CallbackMemoryResource(lambda n, s: host.allocate(n), lambda p, n, s: host.deallocate(p, n))
        stats = mr.StatisticsResourceAdaptor(cb)
        kept = stats.allocate(4096)          # never freed
        freed_late = cb.allocate(512)
        import atexit
        atexit.register(lambda: cb.deallocate(freed_late, 512))
        print("ok")
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ok"]


def test_a_buffer_freed_at_exit_after_its_callback_resource_s_python_object_does_not_crash_it(tmp_path):
    """A device buffer in __main__ holds a callback resource whose Python object is gone: at exit
    Python empties module globals (those that kept the callbacks alive among them) before it frees
    the buffer, whose free then calls the callbacks. They must still be there."""
    from conftest import HOST_POOL_CONFIG, host_config, run_python

    r = run_python(
        """
        import ctypes
        import crmm, crmm.mr as mr

        def resource():  # host memory libcrmm takes for device memory, all the callbacks need bound
            libc = ctypes.CDLL(None)
            libc.aligned_alloc.restype = ctypes.c_void_p
            libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
            libc.free.argtypes = [ctypes.c_void_p]
            def allocate(nbytes, stream, _alloc=libc.aligned_alloc):
                return _alloc(256, max(256, (nbytes + 255) // 256 * 256))
            def deallocate(ptr, nbytes, stream, _free=libc.free):
                _free(ptr)
            return mr.CallbackMemoryResource(allocate, deallocate)

        own = resource()
        kept = crmm.DeviceBuffer._uninitialized(64, mr=own)  # no zero fill: that needs CUDA
        del own  # C keeps the resource, and its callbacks, for `kept`
        print("ok")
        """,
        env={"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ok"]
    assert "Exception ignored" not in r.stderr, r.stderr
