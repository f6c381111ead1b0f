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

from crmm.allocators import numba as crmm_numba  # noqa: E402
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


def test_pointer_is_a_numba_memory_pointer(stats, backend):
    ptr = crmm_numba._memory_pointer(CONTEXT, 4096, stats)
    assert isinstance(ptr, numba_cuda.MemoryPointer)
    assert ptr.context is CONTEXT and ptr.size == 4096 and ptr._cuda_memsize_ == 4096
    assert ptr.is_managed and ptr.refct == 1
    assert ptr.owner is ptr  # as Numba's own pointers: no external owner
    assert ptr.device_pointer_value == ptr._crmm_buffer.ptr() != 0
    assert ptr.handle is ptr.device_pointer
    assert outstanding(stats) == 1
    assert stats.allocation_counts.current_bytes == 4096


def test_memory_goes_with_the_pointer(stats, backend):
    ptr = crmm_numba._memory_pointer(CONTEXT, 100, stats)
    ref = weakref.ref(ptr)
    assert outstanding(stats) == 1
    del ptr
    assert ref() is None
    assert outstanding(stats) == 0


def test_free_frees_once_and_twice_raises(stats, backend):
    ptr = crmm_numba._memory_pointer(CONTEXT, 64, stats)
    ptr.free()
    assert outstanding(stats) == 0
    with pytest.raises(RuntimeError, match="Freeing dead memory"):
        ptr.free()
    del ptr  # nothing freed a second time
    assert outstanding(stats) == 0
    assert stats.allocation_counts.total_count == 1


def test_views_keep_the_memory(stats, backend):
    ptr = crmm_numba._memory_pointer(CONTEXT, 256, stats)
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


def test_size_zero_and_bad_sizes(stats, backend):
    empty = crmm_numba._memory_pointer(CONTEXT, 0, stats)
    assert empty.size == 0 and empty._crmm_buffer.ptr() == 0
    for bad, error in ((-1, ValueError), ("8", TypeError), (1.5, TypeError), (True, TypeError), (1 << 64, OverflowError)):
        with pytest.raises(error):
            crmm_numba._memory_pointer(CONTEXT, bad, stats)
    with pytest.raises(TypeError):
        crmm_numba._memory_pointer(CONTEXT, 8, "not a resource")
    del empty
    assert outstanding(stats) == 0


def test_failed_allocation_leaves_nothing(stats, backend):
    import crmm

    with pytest.raises(crmm.OutOfMemoryError):
        crmm_numba._memory_pointer(CONTEXT, 2 << 30, stats)  # past what the callbacks hand out
    assert outstanding(stats) == 0
