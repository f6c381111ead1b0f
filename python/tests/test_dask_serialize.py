"""Dask's serializers for crmm's DeviceBuffer (crmm/_dask_serialize.py), no device needed: the
buffers are host memory that libcrmm is told is device memory (test_device_buffer_alloc's
HostAsDevice), so the "cuda" family, which moves the buffer itself, runs here; the copies of the
"dask" family run in test_dask_serialize_gpu.py. Skips without distributed."""

import textwrap

import pytest

pytest.importorskip("distributed")

from distributed.protocol import deserialize, serialize  # noqa: E402
from distributed.protocol.cuda import cuda_deserialize, cuda_serialize  # noqa: E402
from distributed.protocol.serialize import dask_deserialize, dask_serialize  # noqa: E402

from conftest import run_python  # noqa: E402
from crmm import _dask_serialize  # noqa: E402
from crmm.pylibrmm.device_buffer import DeviceBuffer  # noqa: E402
from test_device_buffer_alloc import host  # noqa: E402,F401 (the fixture: buffers over host memory)


def test_every_family_finds_crmms_functions():
    assert cuda_serialize.dispatch(DeviceBuffer) is _dask_serialize.cuda_serialize
    assert cuda_deserialize.dispatch(DeviceBuffer) is _dask_serialize.cuda_deserialize
    assert dask_serialize.dispatch(DeviceBuffer) is _dask_serialize.dask_serialize
    assert dask_deserialize.dispatch(DeviceBuffer) is _dask_serialize.dask_deserialize


@pytest.mark.parametrize("order", ["crmm first", "distributed first"])
def test_registered_whichever_is_imported_first_and_crmm_never_imports_distributed(order):
    first, second = ("crmm", "distributed.protocol") if order == "crmm first" else ("distributed.protocol", "crmm")
    r = run_python(textwrap.dedent(f"""
        import importlib, sys
        importlib.import_module("{first}")
        print("distributed" in sys.modules)
        importlib.import_module("{second}")
        import crmm
        from distributed.protocol.cuda import cuda_serialize
        print(cuda_serialize.dispatch(crmm.DeviceBuffer).__module__)
    """))
    assert r.returncode == 0, r.stderr
    imported_early, module = r.stdout.split()
    assert imported_early == ("False" if order == "crmm first" else "True")
    assert module == "crmm._dask_serialize"


def test_the_cuda_family_sends_the_buffer_itself(host):
    buf = DeviceBuffer._uninitialized(4096, mr=host.mr)
    header, frames = serialize(buf, serializers=("cuda",))
    assert header["serializer"] == "cuda"
    assert len(frames) == 1 and frames[0] is buf
    back = deserialize(header, frames, deserializers=("cuda",))
    assert back is buf and back.size == 4096


def test_an_empty_buffer_goes_through_the_cuda_family(host):
    buf = DeviceBuffer._uninitialized(0, mr=host.mr)
    header, frames = serialize(buf, serializers=("cuda",))
    assert deserialize(header, frames, deserializers=("cuda",)).size == 0


def test_a_frame_of_another_length_than_the_header_says_is_refused(host):
    buf = DeviceBuffer._uninitialized(4096, mr=host.mr)
    other = DeviceBuffer._uninitialized(100, mr=host.mr)
    header, _ = _dask_serialize.cuda_serialize(buf)
    with pytest.raises(ValueError, match="100 bytes where the header says 4096"):
        _dask_serialize.cuda_deserialize(header, [other])
    with pytest.raises(ValueError, match="where the header says 4096"):
        _dask_serialize.dask_deserialize(header, [b"short"])


@pytest.mark.parametrize("frames", [[], "two"], ids=["none", "two"])
def test_not_exactly_one_frame_is_refused(host, frames):
    buf = DeviceBuffer._uninitialized(16, mr=host.mr)
    if frames == "two":
        frames = [buf, buf]
    for deserialize_one in (_dask_serialize.cuda_deserialize, _dask_serialize.dask_deserialize):
        with pytest.raises(ValueError, match="one frame, not %d" % len(frames)):
            deserialize_one({"nbytes": 16}, frames)


def test_a_frame_that_is_not_device_memory_is_refused_by_the_cuda_family():
    with pytest.raises(TypeError, match="__cuda_array_interface__"):
        _dask_serialize.cuda_deserialize({"nbytes": 3}, [b"abc"])


def test_a_distributed_without_the_dispatchers_only_warns(monkeypatch):
    """register_lazily runs inside `import distributed`: a distributed whose dispatchers are not
    what crmm expects gets a warning, never an exception (that would fail its import)."""
    import distributed.protocol.cuda as cuda_module

    monkeypatch.delattr(cuda_module, "cuda_serialize")
    with pytest.warns(RuntimeWarning, match="Dask serializers for DeviceBuffer not registered"):
        _dask_serialize.register_lazily()
