"""Stream and CudaStreamPool argument checks, and the default streams (no device needed)."""

import pytest

from crmm.pylibrmm.cuda_stream_pool import CudaStreamPool
from crmm.pylibrmm.stream import (
    DEFAULT_STREAM,
    LEGACY_DEFAULT_STREAM,
    PER_THREAD_DEFAULT_STREAM,
    CudaStreamFlags,
    Stream,
)


def test_flags_are_the_cuda_values():
    assert CudaStreamFlags.SYNC_DEFAULT == 0
    assert CudaStreamFlags.NON_BLOCKING == 1
    assert isinstance(CudaStreamFlags.NON_BLOCKING, int)


def test_default_streams_are_default():
    assert DEFAULT_STREAM.is_default()
    assert LEGACY_DEFAULT_STREAM.is_default()
    assert not PER_THREAD_DEFAULT_STREAM.is_default()  # as RMM's (test_rmm_reference.py)
    assert DEFAULT_STREAM.handle == 0


def test_wrapping_a_default_handle_is_default():
    assert Stream(0).is_default()
    assert Stream(DEFAULT_STREAM).is_default()


class _ProtocolStream:
    def __init__(self, version, handle):
        self.version, self.h = version, handle

    def __cuda_stream__(self):
        return (self.version, self.h)


def test_cuda_stream_protocol_is_used():
    s = Stream(_ProtocolStream(0, 0))
    assert s.is_default()
    assert s.__cuda_stream__() == (0, 0)


def test_unknown_protocol_version_is_refused():
    with pytest.raises(NotImplementedError):
        Stream(_ProtocolStream(1, 0))


@pytest.mark.parametrize("bad", ["stream", 1.5, object(), [0]])
def test_objects_that_are_no_stream_are_refused(bad):
    with pytest.raises(TypeError, match="Cannot create stream"):
        Stream(bad)


def test_bool_is_no_stream():
    with pytest.raises(TypeError):
        Stream(True)


@pytest.mark.parametrize("bad", [-1, 1 << 64])
def test_handles_out_of_range_are_refused(bad):
    with pytest.raises(ValueError):
        Stream(bad)


@pytest.mark.parametrize("flags,exc", [(2, ValueError), (-1, ValueError), ("x", TypeError), (True, TypeError)])
def test_bad_flags_are_refused(flags, exc):
    with pytest.raises(exc):
        Stream(flags=flags)


def test_flags_only_for_a_new_stream():
    with pytest.raises(ValueError, match="flags"):
        Stream(0, flags=CudaStreamFlags.NON_BLOCKING)


@pytest.mark.parametrize("size,exc", [(0, ValueError), (-3, ValueError), ("4", TypeError), (2.0, TypeError), (True, TypeError)])
def test_bad_pool_sizes_are_refused(size, exc):
    with pytest.raises(exc):
        CudaStreamPool(pool_size=size)


def test_bad_pool_flags_are_refused():
    with pytest.raises(ValueError):
        CudaStreamPool(flags=7)


@pytest.mark.parametrize("handle,exc", [(1 << 64, OverflowError), (1 << 70, OverflowError), (-1, OverflowError), ("0x10", TypeError), (1.0, TypeError)])
def test_a_protocol_handle_that_is_no_address_is_refused(handle, exc):
    # RMM converts the handle to uintptr_t (OverflowError, TypeError); it is never cut to 64 bits
    # (2**64 would become stream 0, the default stream) nor parsed from text
    with pytest.raises(exc):
        Stream(_ProtocolStream(0, handle))
