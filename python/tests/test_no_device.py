"""Without a CUDA device every device operation raises CudaError with CUDA's reason, and a
host-only resource is refused for device buffers before any CUDA call."""

import pytest

import crmm
import crmm.mr as mr
from conftest import HOST_POOL_CONFIG, host_config, run_python
from crmm.pylibrmm.device_buffer import to_device


def test_device_buffer_needs_a_device(no_gpu):
    with pytest.raises(crmm.CudaError, match="CUDA error"):
        crmm.DeviceBuffer(size=5)


def test_to_device_needs_a_device(no_gpu):
    with pytest.raises(crmm.CudaError):
        to_device(b"abc")


def test_current_resource_needs_a_device(no_gpu):
    with pytest.raises(crmm.CudaError, match="cudaGetDeviceCount|no NVIDIA driver"):
        mr.get_current_device_resource()


def test_building_for_a_device_names_what_is_missing(no_gpu):
    """Not the runtime's "driver version is insufficient", which is how it reports no driver."""
    missing = "cudaGetDeviceCount|no NVIDIA driver|no CUDA device"
    with pytest.raises(crmm.CudaError, match=missing):
        crmm.reinitialize(pool_allocator=True, initial_pool_size="1MiB")
    with pytest.raises(crmm.CudaError, match=missing):
        mr.PoolMemoryResource(mr.CudaMemoryResource(), initial_pool_size="1MiB")


def test_new_stream_needs_a_device(no_gpu):
    with pytest.raises(crmm.CudaError):
        crmm.pylibrmm.Stream()


def test_host_resource_is_refused_for_a_device_buffer():
    with pytest.raises(crmm.InvalidArgumentError, match="not device accessible"):
        crmm.DeviceBuffer(size=5, mr=mr.HostMemoryResource())


def test_set_resource_needs_a_device(no_gpu):
    with pytest.raises(crmm.CudaError):
        mr.set_current_device_resource(mr.HostMemoryResource())


def test_per_device_bad_arguments():
    with pytest.raises(TypeError):
        mr.get_per_device_resource("0")
    with pytest.raises(TypeError):
        mr.set_per_device_resource(0, "cuda")


HOST_DEFAULT = """
import crmm, crmm.mr as mr, crmm.statistics as statistics
here = mr.get_current_device_resource()
assert type(mr.get_current_device_resource()) is type(here) and here.kind == "pool", here.kind
mine = mr.HostMemoryResource()
mr.set_current_device_resource(mine)
assert mr.get_current_device_resource() is mine
mr.set_current_device_resource(here)
main = mr.MemoryResource.from_config("main")
main.deallocate(main.allocate(64), 64)
statistics.enable_statistics()
stats = mr.get_current_device_resource()
stats.deallocate(stats.allocate(100), 100)
assert statistics.get_statistics().total_count == 1
print("ok")
"""


def test_the_current_device_functions_work_over_a_host_config(tmp_path):
    """Over a config whose resource is host memory, Python's current-device functions work as
    C's do, with a GPU or without (device 0 stands for the device then)."""
    config = host_config(tmp_path, HOST_POOL_CONFIG)
    done = run_python(HOST_DEFAULT, env={"CRMM_CONFIG": config}, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr
