"""Without a CUDA device every device operation raises CudaError with CUDA's reason, and a
host-only resource is refused for device buffers before any CUDA call."""

import pytest

import crmm
import crmm.mr as mr
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
