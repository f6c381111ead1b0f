"""crmm's Numba memory pointer (crmm.allocators.numba.CrmmMemoryPointer): what Numba relies on
of a MemoryPointer, and that the crmm buffer behind it is freed exactly once, when the pointer
goes or at its free(). No device needed: the memory comes from a `callback` resource over host
memory flagged device accessible (test_device_buffer_alloc.HostAsDevice), under a `statistics`
adaptor; Numba's driver is never called (the pointer is made against a stand-in context).
Numba's memalloc itself, over the current device's resource, is tested on the GPU
(test_frameworks_gpu.py)."""

import gc
import weakref

import pytest

numba_cuda = pytest.importorskip("numba.cuda", reason="Numba is not installed")

import crmm  # noqa: E402
from crmm import _alloc  # noqa: E402
from crmm.allocators import numba as crmm_numba  # noqa: E402
from crmm.pylibrmm.stream import DEFAULT_STREAM  # noqa: E402
from crmm.pylibrmm.memory_resource import StatisticsResourceAdaptor  # noqa: E402
from test_device_buffer_alloc import HostAsDevice, backend  # noqa: E402,F401

CONTEXT = object()  # a stand-in: the pointer only keeps it


@pytest.fixture
def stats():
    host = HostAsDevice()
    yield StatisticsResourceAdaptor(host.mr)
    gc.collect()
    assert host.live == {}, "blocks left outstanding"


def outstanding(stats):
    return stats.allocation_counts.current_count


@pytest.fixture(params=["python over the extension", "python over ctypes", "c"])
def memory_pointer(request, stats):
    """memory_pointer(size) -> a CrmmMemoryPointer from `stats`: made by _memory_pointer (the
    manager's memalloc without the extension) through either implementation of DeviceBuffer's
    calls, or by the extension's numba_allocator (its memalloc with it), whose fallback for what
    it does not serve is _memory_pointer."""
    path = "ctypes" if request.param == "python over ctypes" else "extension"
    if path == "extension" and _alloc.extension is None:
        pytest.skip("crmm._fastalloc is not built here")
    before = _alloc.use(path)

    def python(size):
        return crmm_numba._memory_pointer(CONTEXT, size, stats)

    if request.param == "c":
        yield _alloc.extension.numba_allocator(crmm_numba.CrmmMemoryPointer, crmm_numba._device_pointer, CONTEXT,
                                               DEFAULT_STREAM._cstream, stats._handle, crmm._lib, python)
    else:
        yield python
    _alloc.use(before)


def test_pointer_is_a_numba_memory_pointer(stats, memory_pointer):
    ptr = memory_pointer(4096)
    assert isinstance(ptr, numba_cuda.MemoryPointer)
    assert ptr.context is CONTEXT and ptr.size == 4096 and ptr._cuda_memsize_ == 4096
    assert ptr.is_managed and ptr.refct == 1
    assert ptr.owner is ptr  # as Numba's own pointers: no external owner
    assert ptr.device_pointer_value == ptr._crmm_buffer.ptr() != 0
    assert ptr.handle is ptr.device_pointer
    assert outstanding(stats) == 1
    assert stats.allocation_counts.current_bytes == 4096


def test_memory_goes_with_the_pointer(stats, memory_pointer):
    ptr = memory_pointer(100)
    ref = weakref.ref(ptr)
    assert outstanding(stats) == 1
    del ptr
    assert ref() is None
    assert outstanding(stats) == 0


def test_free_frees_once_and_twice_raises(stats, memory_pointer):
    ptr = memory_pointer(64)
    ptr.free()
    assert outstanding(stats) == 0
    with pytest.raises(RuntimeError, match="Freeing dead memory"):
        ptr.free()
    del ptr  # nothing freed a second time
    assert outstanding(stats) == 0
    assert stats.allocation_counts.total_count == 1


def test_views_keep_the_memory(stats, memory_pointer):
    ptr = memory_pointer(256)
    base = ptr.device_pointer_value
    view = ptr.view(64, 128)  # Numba's reference-counted handle over a slice
    assert view.size == 64 and view.device_pointer_value == base + 64
    owned = ptr.own()
    assert ptr.refct == 3
    del owned, view
    gc.collect()
    assert ptr.refct == 1 and outstanding(stats) == 1  # the pointer still holds the memory
    del ptr
    gc.collect()
    assert outstanding(stats) == 0


def test_size_zero_and_bad_sizes(stats, memory_pointer):
    empty = memory_pointer(0)
    assert empty.size == 0 and empty._crmm_buffer.ptr() == 0
    for bad, error in ((-1, ValueError), ("8", TypeError), (1.5, TypeError), (True, TypeError), (1 << 64, OverflowError)):
        with pytest.raises(error):
            memory_pointer(bad)
    with pytest.raises(TypeError):
        crmm_numba._memory_pointer(CONTEXT, 8, "not a resource")
    del empty
    assert outstanding(stats) == 0


def test_failed_allocation_leaves_nothing(stats, memory_pointer):
    with pytest.raises(crmm.OutOfMemoryError):
        memory_pointer(2 << 30)  # past what the callbacks hand out
    assert outstanding(stats) == 0


def test_the_c_allocator_serves_positive_ints_and_passes_the_rest_on(stats):
    """numba_allocator serves a positive int itself and hands anything else to its fallback,
    which raises for bad sizes as memalloc does."""
    if _alloc.extension is None:
        pytest.skip("crmm._fastalloc is not built here")
    passed = []

    def fallback(size):
        passed.append(size)
        return crmm_numba._memory_pointer(CONTEXT, size, stats)

    memalloc = _alloc.extension.numba_allocator(crmm_numba.CrmmMemoryPointer, crmm_numba._device_pointer, CONTEXT,
                                                DEFAULT_STREAM._cstream, stats._handle, crmm._lib, fallback)
    served = memalloc(512)
    assert passed == [] and type(served) is crmm_numba.CrmmMemoryPointer and served.size == 512
    assert served.device_pointer_value == served._crmm_buffer.ptr() and served.handle is served.device_pointer
    for size in (0, True, 1 << 64, -1, 2.0):
        try:
            memalloc(size)
        except (TypeError, ValueError, OverflowError):
            pass
    assert passed == [0, True, 1 << 64, -1, 2.0]
    del served
    gc.collect()
    assert outstanding(stats) == 0 and stats.allocation_counts.total_count == 1  # size 0 allocates nothing


class _OwnNew(crmm_numba.CrmmMemoryPointer):
    def __new__(cls, *args):
        return super().__new__(cls)


@pytest.mark.parametrize("change, error", [
    ({"count": 6}, "takes 7 arguments"), ({0: "pointer"}, "must be a type"),
    ({0: int}, "object.__new__"), ({0: _OwnNew}, "object.__new__"), ({1: None}, "callable"),
    ({6: 5}, "callable"), ({3: "stream"}, "stream"), ({4: -1}, "mr"),
])
def test_the_c_allocator_refuses_bad_arguments(change, error):
    if _alloc.extension is None:
        pytest.skip("crmm._fastalloc is not built here")
    args = [crmm_numba.CrmmMemoryPointer, crmm_numba._device_pointer, CONTEXT, None, None, crmm._lib, lambda n: n]
    for i, value in change.items():
        if i != "count":
            args[i] = value
    with pytest.raises((TypeError, ValueError, OverflowError), match=error):
        _alloc.extension.numba_allocator(*args[:change.get("count", len(args))])


def test_the_manager_allocates_in_c_where_the_extension_is_built(backend):
    """RMMNumbaManager's memalloc is the extension's numba_allocator wherever the extension is
    built, whichever path DeviceBuffer is switched to when the manager is made (its method, the
    fallback, where it is not)."""
    manager = crmm_numba.RMMNumbaManager(context=CONTEXT)
    if _alloc.extension is not None:
        assert type(manager.memalloc).__name__ == "builtin_function_or_method"
    else:
        assert manager.memalloc.__func__ is crmm_numba.RMMNumbaManager.memalloc
    assert manager.context is CONTEXT


def test_the_manager_is_freed_when_its_last_reference_goes():
    """Numba drops its memory manager with its context: the manager (and the context it holds)
    goes at once by reference counting, not only when the cycle collector next runs."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        manager = crmm_numba.RMMNumbaManager(context=CONTEXT)
        gone = weakref.ref(manager)
        del manager
        assert gone() is None
    finally:
        if enabled:
            gc.enable()


@pytest.mark.parametrize("size, error", [(-1, ValueError), ("8", TypeError), (1 << 64, OverflowError)])
def test_the_manager_refuses_bad_sizes(size, error):
    with pytest.raises(error):
        crmm_numba.RMMNumbaManager(context=CONTEXT).memalloc(size)


def test_an_ipc_handle_the_driver_refuses_is_an_error_not_a_handle(monkeypatch):
    """cuIpcGetMemHandle refuses memory mapped page by page (crmm's expandable pool): the
    manager's get_ipc_handle raises Numba's CudaAPIError naming crmm.ipc, rather than returning
    a handle without its bytes that fails later in another process."""
    from numba.cuda.cudadrv import driver

    monkeypatch.setattr(driver, "device_extents", lambda memory: (0x7000, 0x8000))
    if crmm_numba._nvidia_binding():  # NVIDIA's bindings return the CUresult
        refused = driver.binding.CUresult.CUDA_ERROR_INVALID_VALUE
        monkeypatch.setattr(driver.binding, "cuIpcGetMemHandle", lambda start: (refused, None))
    else:  # Numba's ctypes wrapper raises it

        def refuse(handle, start):
            raise driver.CudaAPIError(1, "CUDA_ERROR_INVALID_VALUE")

        # into the instance's dict: reading the attribute first would start Numba's driver
        monkeypatch.setitem(vars(driver.driver), "cuIpcGetMemHandle", refuse)

    class Memory:
        handle = 0x7100
        size = 256

    with pytest.raises(driver.CudaAPIError, match="crmm.ipc.export"):
        crmm_numba.RMMNumbaManager(context=CONTEXT).get_ipc_handle(Memory())
