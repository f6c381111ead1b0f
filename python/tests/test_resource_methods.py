"""RMM's methods of the resource classes and module functions, over host memory (no device
needed): tracking, limiting and logging read back what passed through them; streams come from
any object with __cuda_stream__; size strings."""

import ctypes
import os

import pytest

import crmm
import crmm.mr as mr
from crmm.pylibrmm import stream as stream_mod


def test_tracking_lists_outstanding_allocations():
    t = mr.TrackingResourceAdaptor(mr.HostMemoryResource())
    assert t.get_allocated_bytes() == 0
    a, b = t.allocate(100), t.allocate(28)
    assert t.get_allocated_bytes() == 128
    text = t.get_outstanding_allocations_str()
    assert "Outstanding allocations: 2" in text
    assert f"{a:x}" in text.lower() and f"{b:x}" in text.lower()
    t.log_outstanding_allocations()
    t.deallocate(a, 100)
    t.deallocate(b, 28)
    assert t.get_allocated_bytes() == 0
    assert t.get_outstanding_allocations_str() == ""  # as RMM: nothing outstanding, no text


def test_tracking_methods_on_a_resource_without_tracking_raise():
    t = mr.TrackingResourceAdaptor(mr.HostMemoryResource())
    impostor = mr.MemoryResource.__new__(mr.TrackingResourceAdaptor)
    impostor._ptr, impostor._upstream = t.upstream_mr.ptr, None
    try:
        with pytest.raises(crmm.UnsupportedError):
            impostor.get_allocated_bytes()
    finally:
        impostor._ptr = None


def test_limiting_reports_its_limit_and_use():
    lim = mr.LimitingResourceAdaptor(mr.HostMemoryResource(), "1MiB")
    assert lim.get_allocation_limit() == 1 << 20
    p = lim.allocate(4096)
    assert lim.get_allocated_bytes() == 4096
    lim.deallocate(p, 4096)
    assert lim.get_allocated_bytes() == 0


def test_logging_writes_its_file_on_flush(tmp_path):
    log = mr.LoggingResourceAdaptor(mr.HostMemoryResource(), log_file_name=tmp_path / "host.csv")
    name = tmp_path / "host.dev0.csv"  # RMM's name: the device before the extension
    assert log.get_file_name() == str(name)
    p = log.allocate(64)
    log.deallocate(p, 64)
    log.flush()
    lines = name.read_text().splitlines()
    assert lines[0] == "Thread,Time,Action,Pointer,Size,Stream"
    assert [line.split(",")[2] for line in lines[1:]] == ["allocate", "free"]
    assert lines[1].split(",")[4] == "64"


def test_logging_file_name_checks(tmp_path):
    with pytest.raises(TypeError):
        mr.LoggingResourceAdaptor(mr.HostMemoryResource(), log_file_name=3)
    with pytest.raises(ValueError, match="NUL"):
        mr.LoggingResourceAdaptor(mr.HostMemoryResource(), log_file_name=str(tmp_path / "a\0b"))


def test_pool_size_is_what_the_pool_holds():
    pool = mr.PoolMemoryResource(mr.HostMemoryResource(), initial_pool_size="256KiB", maximum_pool_size="1MiB")
    assert pool.pool_size() == 256 << 10
    p = pool.allocate(512 << 10)
    assert pool.pool_size() >= 512 << 10
    pool.deallocate(p, 512 << 10)


class ForeignStream:
    """A stream of another library, known only by the CUDA stream protocol."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def test_streams_come_from_any_object_with_the_protocol():
    h = mr.HostMemoryResource()
    foreign = ForeignStream(2)
    s = stream_mod.as_stream(foreign)
    assert isinstance(s, stream_mod.Stream) and s.handle == 2 and s._owner is foreign
    p = h.allocate(64, stream=foreign)
    h.deallocate(p, 64, stream=foreign)


@pytest.mark.parametrize("bad", [None, 0, "stream", object()])
def test_stream_arguments_without_the_protocol_are_refused(bad):
    with pytest.raises(TypeError, match="__cuda_stream__"):
        mr.HostMemoryResource().allocate(8, stream=bad)


def test_a_protocol_of_another_version_is_refused():
    class Future:
        def __cuda_stream__(self):
            return (1, 0)

    with pytest.raises(NotImplementedError):
        stream_mod.as_stream(Future())


def test_module_functions_exist_as_in_rmm():
    assert isinstance(crmm.__git_commit__, str)
    assert callable(mr._flush_logs) and callable(mr._initialize)
    assert mr.get_log_filenames is crmm.get_log_filenames
    assert mr.enable_logging is crmm.enable_logging


def test_flush_logs_with_nothing_logging_does_nothing():
    mr._flush_logs()


def test_available_device_memory_without_a_device(no_gpu):
    with pytest.raises(crmm.CudaError):
        mr.available_device_memory()


@pytest.mark.parametrize("text,size", [("1.5GiB", 3 << 29), ("10MB", 10 * 10**6), ("64 KiB", 64 << 10), ("100", 100), ("2kb", 2000)])
def test_size_strings(text, size):
    from crmm._host import parse_bytes, size_param

    assert parse_bytes(text) == size
    assert size_param(text, "x") == size
    assert size_param("50%", "x") == "50%"


@pytest.mark.parametrize("text", ["", "GiB", "-1", "1.5B", "1 XB", "99999999999EiB", "0%", "101%"])
def test_bad_size_strings(text):
    from crmm._host import size_param

    with pytest.raises(ValueError):
        size_param(text, "x")


def test_a_log_file_name_is_named_as_rmm_names_it(tmp_path, monkeypatch):
    """".dev<N>" before the extension, absolute; '%' is not an escape; not a regular file: as it is."""
    monkeypatch.chdir(tmp_path)
    log = mr.LoggingResourceAdaptor(mr.HostMemoryResource(), log_file_name="100%_d.csv")
    name = tmp_path / "100%_d.dev0.csv"
    assert log.get_file_name() == str(name)
    quiet = mr.LoggingResourceAdaptor(mr.HostMemoryResource(), log_file_name=os.devnull)
    assert quiet.get_file_name() == os.devnull
    quiet.deallocate(quiet.allocate(8), 8)
    quiet.flush()
    log.deallocate(log.allocate(8), 8)
    log.flush()
    assert name.read_text().startswith("Thread,Time,Action")


def test_a_binning_resource_built_in_c_takes_bins_and_lists_them(tmp_path):
    """The object made for a binning resource of the config (not by its class's __init__) has
    RMM's bin_mrs and add_bin, as one made from Python does."""
    from conftest import host_config, run_python

    path = host_config(tmp_path, "[resource.h]\nplugin = host\n[resource.b]\nplugin = binning\nupstream = h\n")
    r = run_python(
        """
        import crmm.mr as mr
        b = mr.MemoryResource.from_config("b", device=0)
        assert type(b) is mr.BinningMemoryResource
        assert b.bin_mrs == []
        mine = mr.FixedSizeMemoryResource(mr.HostMemoryResource(), block_size=4096, blocks_to_preallocate=1)
        b.add_bin(4096, mine)
        assert b.bin_mrs == [mine] and b.bin_mrs[0] is mine
        p = b.allocate(3000)
        assert mine.query("allocations") == 1
        b.deallocate(p, 3000)
        print("ok")
        """,
        env={"CRMM_CONFIG": path},
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


class _FakePrefetch:
    """cudaMemPrefetchAsync as _lib loads it (a ctypes function), recording each call."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)
        return 0


def test_prefetch_to_the_cpu_gives_cuda_13_the_host_location(monkeypatch):
    """cudaCpuDeviceId (-1), RMM's way to prefetch managed memory to the host, is the host
    location of CUDA 13's cudaMemPrefetchAsync, not a device location of -1 (invalid: CUDA's
    error was taken for memory that is not managed, so the prefetch did nothing)."""
    from crmm import _lib

    fake = _FakePrefetch()

    def version(out):
        out._obj.value = 13000
        return 0

    monkeypatch.setattr(_lib, "_cuda_function", lambda name, restype, argtypes: fake)
    monkeypatch.setattr(_lib, "cuda_runtime_get_version", version)
    prefetch = _lib._mem_prefetch()
    assert prefetch(0x1000, 64, -1, None) == 0
    assert prefetch(0x1000, 64, 3, None) == 0
    (_, _, host, flags, _), (_, _, device, _, _) = fake.calls
    assert (host.type, flags) == (2, 0), "cudaMemLocationTypeHost"
    assert (device.type, device.id) == (1, 3), "cudaMemLocationTypeDevice, the ordinal"
