"""RMM's methods that need a device: DeviceBuffer.prefetch, available_device_memory,
enable_logging twice, _flush_logs of a logged device."""

import pytest

import crmm
import crmm.mr as mr
from crmm.pylibrmm.stream import Stream


def test_prefetch_of_managed_memory(gpu):
    managed = mr.ManagedMemoryResource()
    db = crmm.DeviceBuffer(size=1 << 20, mr=managed)
    db.prefetch()
    db.prefetch(device=0, stream=Stream())
    db.prefetch(device=-1)  # cudaCpuDeviceId: to the host (CUDA refuses a device location of -1)
    db.stream.synchronize()
    assert db.tobytes() == bytes(1 << 20)


def test_prefetch_of_device_memory_does_nothing(gpu):
    db = crmm.DeviceBuffer.to_device(b"abc")
    db.prefetch()
    assert db.tobytes() == b"abc"


@pytest.mark.parametrize("kwargs,exc", [({"device": "0"}, TypeError), ({"device": 1.0}, TypeError), ({"stream": 5}, TypeError)])
def test_prefetch_argument_checks(gpu, kwargs, exc):
    with pytest.raises(exc):
        crmm.DeviceBuffer(size=8).prefetch(**kwargs)


def test_available_device_memory(gpu):
    free, total = mr.available_device_memory()
    assert isinstance(free, int) and isinstance(total, int)
    assert 0 < total and free <= total


def test_enable_logging_while_on_keeps_the_first_file(gpu, tmp_path):
    """As RMM: a device that logs already is not wrapped again, so the second name is unused."""
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    try:
        crmm.enable_logging(str(first))
        crmm.enable_logging(str(second))
        assert crmm.get_log_filenames()[0] == str(tmp_path / "first.dev0.csv")
        db = crmm.DeviceBuffer(size=10)
        del db
        mr._flush_logs()
        assert ",allocate," in (tmp_path / "first.dev0.csv").read_text()
        assert not (tmp_path / "second.dev0.csv").exists()
    finally:
        crmm.disable_logging()
    assert crmm.get_log_filenames()[0] is None


def test_async_pool_handle_and_ipc_option(gpu):
    plain = mr.CudaAsyncMemoryResource()
    assert plain.pool_handle() != 0
    try:
        ipc = mr.CudaAsyncMemoryResource(enable_ipc=True)
    except crmm.CrmmError as e:  # a device or driver without POSIX fd export says so
        pytest.skip(f"no IPC-capable async pool here: {e}")
    assert ipc.pool_handle() not in (0, plain.pool_handle())
    ipc.deallocate(ipc.allocate(1 << 20), 1 << 20)
