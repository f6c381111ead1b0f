"""copy.copy, copy.deepcopy and pickle of the objects that own a libcrmm handle (no device
needed): a copy holds a reference of its own or is refused, pickling is refused with TypeError,
and the original keeps working after the copy is gone."""

import copy
import gc
import os
import pickle

import pytest

import crmm
import crmm.mr as mr
from crmm._lib import lib
from crmm.pylibrmm.stream import DEFAULT_STREAM, LEGACY_DEFAULT_STREAM, PER_THREAD_DEFAULT_STREAM, Stream

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


def host_resources():
    """Every resource class that runs over host memory, each with its own upstream."""
    return [
        mr.HostMemoryResource(),
        mr.MemoryResource("host"),
        mr.StatisticsResourceAdaptor(mr.HostMemoryResource()),
        mr.TrackingResourceAdaptor(mr.HostMemoryResource()),
        mr.LimitingResourceAdaptor(mr.HostMemoryResource(), 1 << 20),
        mr.PoolMemoryResource(mr.HostMemoryResource(), initial_pool_size="1MiB"),
        mr.BinningMemoryResource(mr.HostMemoryResource()),
        mr.FixedSizeMemoryResource(mr.HostMemoryResource(), block_size=4096, blocks_to_preallocate=2),
        mr.FailureCallbackResourceAdaptor(mr.HostMemoryResource(), lambda nbytes: False),
        mr.ArenaMemoryResource(mr.HostMemoryResource(), arena_size="4MiB"),
        mr.LoggingResourceAdaptor(mr.HostMemoryResource(), log_file_name=os.devnull),
    ]


def uses(res):
    """Allocate, write and free through `res` (fails or crashes if its C resource was freed)."""
    import ctypes

    p = res.allocate(256)
    ctypes.memset(p, 0x11, 256)
    res.deallocate(p, 256)


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
def test_a_copied_resource_holds_its_own_reference(how):
    for res in host_resources():
        before = lib.crmm_resource_refcount(res.ptr)
        twin = how(res)
        assert type(twin) is type(res) and twin is not res
        assert twin.ptr == res.ptr and twin == res
        assert lib.crmm_resource_refcount(res.ptr) == before + 1
        uses(twin)
        del twin
        gc.collect()
        assert lib.crmm_resource_refcount(res.ptr) == before
        uses(res)


def test_a_second_init_is_refused_and_changes_nothing():
    """__init__ called again on a made resource (any class): StateError, and the object keeps its
    C resource, its reference count and its upstream."""
    for res in host_resources():
        if isinstance(res, mr.BinningMemoryResource):  # a bin, which a re-run __init__ would forget
            res.add_bin(4096, mr.FixedSizeMemoryResource(mr.HostMemoryResource(), block_size=4096, blocks_to_preallocate=1))
        bins = res.bin_mrs if isinstance(res, mr.BinningMemoryResource) else None
        ptr, refs, upstream = res.ptr, lib.crmm_resource_refcount(res.ptr), res._upstream_or_none()
        for again in (lambda: type(res).__init__(res, mr.HostMemoryResource()), lambda: mr.MemoryResource.__init__(res, "host")):
            with pytest.raises(crmm.StateError, match="already made") as info:
                again()
            assert info.value.status == "CRMM_ERROR_STATE"
            assert res.ptr == ptr and lib.crmm_resource_refcount(ptr) == refs
            if upstream is not None:
                assert res.get_upstream() is upstream
            if bins is not None:
                assert res.bin_mrs == bins and len(bins) == 1
            uses(res)


@pytest.mark.parametrize("stream", [DEFAULT_STREAM, PER_THREAD_DEFAULT_STREAM], ids=["default", "per_thread"])
def test_a_second_init_of_a_stream_is_refused(stream):
    view = Stream(stream)
    for made in (stream, view):
        handle = made.handle
        with pytest.raises(crmm.StateError, match="already made"):
            made.__init__()
        assert made.handle == handle
    assert Stream(view).handle == stream.handle


def test_a_second_init_keeps_a_callback_resource_s_functions():
    """The functions of the first __init__ still serve the resource and the adaptor above it."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc.aligned_alloc.restype, libc.aligned_alloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    calls = []

    def allocate(nbytes, stream):
        calls.append(nbytes)
        return libc.aligned_alloc(256, 256)

    cb = mr.CallbackMemoryResource(allocate, lambda ptr, nbytes, stream: libc.free(ptr))
    stats = mr.StatisticsResourceAdaptor(cb)
    with pytest.raises(crmm.StateError, match="already made"):
        cb.__init__(lambda nbytes, stream: 0, lambda ptr, nbytes, stream: None)
    gc.collect()
    uses(stats)
    uses(cb)
    assert calls == [256, 256]


def test_memory_from_a_copy_frees_through_the_original():
    res = mr.StatisticsResourceAdaptor(mr.HostMemoryResource())
    twin = copy.copy(res)
    p = twin.allocate(100)
    assert res.query("bytes_in_use") == 100
    del twin
    res.deallocate(p, 100)
    assert res.query("bytes_in_use") == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_resources_refuse_pickling(protocol):
    for res in host_resources():
        before = lib.crmm_resource_refcount(res.ptr)
        with pytest.raises(TypeError, match="cannot pickle " + type(res).__name__):
            pickle.dumps(res, protocol=protocol)
        assert lib.crmm_resource_refcount(res.ptr) == before
        uses(res)


def test_a_resource_inside_a_container_refuses_pickling():
    with pytest.raises(TypeError, match="cannot pickle"):
        pickle.dumps({"mr": mr.HostMemoryResource()})


def test_a_resource_copied_inside_a_container_is_its_own_reference():
    res = mr.HostMemoryResource()
    before = lib.crmm_resource_refcount(res.ptr)
    box = copy.deepcopy({"mr": res, "also": [res]})
    assert box["mr"] is box["also"][0], "deepcopy's memo keeps one copy per object"
    assert lib.crmm_resource_refcount(res.ptr) == before + 1
    del box
    gc.collect()
    assert lib.crmm_resource_refcount(res.ptr) == before
    uses(res)


@pytest.mark.parametrize("stream", [DEFAULT_STREAM, LEGACY_DEFAULT_STREAM, PER_THREAD_DEFAULT_STREAM], ids=["default", "legacy", "per_thread"])
@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
def test_a_copied_default_stream_is_a_view_of_the_same_stream(stream, how):
    twin = how(stream)
    assert isinstance(twin, Stream) and twin is not stream
    assert twin.handle == stream.handle and twin == stream
    assert twin.is_default() == stream.is_default()
    del twin
    gc.collect()
    assert stream.is_default() == (stream is not PER_THREAD_DEFAULT_STREAM)
    assert stream.handle in (0, 1, 2)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_streams_refuse_pickling(protocol):
    for stream in (DEFAULT_STREAM, LEGACY_DEFAULT_STREAM, PER_THREAD_DEFAULT_STREAM):
        with pytest.raises(TypeError, match="cannot pickle Stream"):
            pickle.dumps(stream, protocol=protocol)


def test_a_view_of_a_foreign_handle_copies_as_a_view(tmp_path):
    # Stream(int) views a handle without a device call; its copy keeps the view alive
    view = Stream(1)
    twin = copy.copy(view)
    del view
    gc.collect()
    assert twin.handle == 1


def test_crmm_exports_no_other_handle_owner_that_pickles():
    """Every public class whose objects own a C handle refuses pickling (the list is the
    package's: a new class that owns a handle belongs here)."""
    from crmm._handles import HandleOwner
    from crmm.pylibrmm.cuda_stream_pool import CudaStreamPool

    for cls in (mr.MemoryResource, Stream, CudaStreamPool):
        assert issubclass(cls, HandleOwner)
    assert not issubclass(crmm.DeviceBuffer, HandleOwner), "DeviceBuffer pickles to host bytes, as RMM's"
