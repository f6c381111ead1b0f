"""Argument checks of the copy helpers and DeviceBuffer (raised before any CUDA call), and the
host array copy_to_host returns."""

import numpy as np
import pytest

from crmm.pylibrmm import device_buffer as dbm
from crmm.pylibrmm.device_buffer import DeviceBuffer


def test_host_array_prints_as_its_repr():
    a = dbm._host_array(5)
    a[:] = [97, 98, 99, 0, 0]
    assert isinstance(a, np.ndarray) and a.dtype == np.uint8
    assert repr(a) == "array([97, 98, 99,  0,  0], dtype=uint8)"
    assert str(a) == repr(a)
    assert a.tobytes() == b"abc\0\0"


def test_host_array_pickles_as_a_plain_ndarray():
    """A pickle of copy_to_host's array loads where crmm is not installed (it names numpy only)."""
    import pickle
    import subprocess
    import sys

    a = dbm._host_array(3)
    a[:] = [97, 98, 99]
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps(a, protocol=protocol)
        assert b"crmm" not in data
        back = pickle.loads(data)
        assert type(back) is np.ndarray and back.tobytes() == b"abc"
    big = dbm._host_array(1 << 20)
    out_of_band = []
    pickle.dumps(big, protocol=5, buffer_callback=out_of_band.append)
    assert len(out_of_band) == 1  # no copy into the pickle, as for a plain ndarray
    code = "import pickle, sys; a = pickle.loads(sys.stdin.buffer.read()); print(type(a).__name__, a.tobytes())"
    r = subprocess.run([sys.executable, "-I", "-c", code], input=pickle.dumps(a), capture_output=True)
    assert r.returncode == 0 and r.stdout.decode().split() == ["ndarray", "b'abc'"], r.stderr


@pytest.mark.parametrize("bad", [123, "abc", None])
def test_copy_host_to_ptr_needs_a_buffer(bad):
    with pytest.raises(TypeError, match="buffer protocol"):
        dbm.copy_host_to_ptr(bad, 0)


def test_copy_ptr_to_host_needs_writable_memory():
    with pytest.raises(ValueError, match="writable"):
        dbm.copy_ptr_to_host(0, b"abc")


def test_strided_host_memory_is_refused():
    with pytest.raises(ValueError, match="contiguous"):
        dbm.copy_host_to_ptr(np.arange(10, dtype=np.uint8)[::2], 0)


@pytest.mark.parametrize("src,dst,count,exc", [("x", 0, 1, TypeError), (0, -1, 1, OverflowError), (0, 0, -1, ValueError), (0, 0, 1.5, TypeError)])
def test_copy_device_to_ptr_argument_checks(src, dst, count, exc):
    with pytest.raises(exc):
        dbm.copy_device_to_ptr(src, dst, count)


def test_stream_arguments_must_be_streams():
    with pytest.raises(TypeError, match="Stream"):
        dbm.copy_host_to_ptr(b"", 0, stream=0)
    with pytest.raises(TypeError, match="Stream"):
        dbm.to_device(b"abc", stream=None)


@pytest.mark.parametrize("kwargs,exc", [({"size": -1}, ValueError), ({"size": "5"}, TypeError), ({"mr": "cuda"}, TypeError)])
def test_device_buffer_argument_checks(kwargs, exc):
    with pytest.raises(exc):
        DeviceBuffer(**kwargs)


def test_device_buffer_arguments_are_keywords():
    with pytest.raises(TypeError):
        DeviceBuffer(None, 5)


@pytest.mark.parametrize(
    "bad",
    [np.zeros(4, dtype=np.int8), np.zeros(2, dtype=np.uint16), np.zeros(2, dtype=np.float32), np.zeros((2, 2), dtype=np.uint8), memoryview(b"abcd").cast("B", (2, 2))],
    ids=["int8", "uint16", "float32", "2-D", "2-D memoryview"],
)
def test_host_buffers_must_be_1d_unsigned_bytes_as_rmm_takes_them(bad):
    with pytest.raises(ValueError):
        dbm.to_device(bad)
    with pytest.raises(ValueError):
        DeviceBuffer.to_device(bad)
    with pytest.raises(ValueError):
        dbm.copy_host_to_ptr(bad, 0)


@pytest.mark.parametrize("good", [b"abc", bytearray(b"abc"), np.frombuffer(b"abc", dtype=np.uint8), memoryview(b"abc")])
def test_host_buffers_of_unsigned_bytes_are_taken(good):
    from crmm._host import host_view

    assert host_view(good).tobytes() == b"abc"


def test_to_device_of_none_is_a_type_error():
    with pytest.raises(TypeError):
        dbm.to_device(None)
