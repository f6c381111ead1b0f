"""rmm._cuda.gpu on a device: the current device can be read and set, attributes are read by
cuda-python enum member or int, and an unknown device raises CUDARuntimeError."""

import enum

import pytest

from crmm._cuda import gpu

# cudaDevAttrMaxThreadsPerBlock and cudaDevAttrComputeCapabilityMajor in cudaDeviceAttr.
MAX_THREADS_PER_BLOCK = 1
COMPUTE_CAPABILITY_MAJOR = 75


class DeviceAttr(enum.Enum):
    """Stands in for cuda-python's cudaDeviceAttr: an enum whose members carry .value."""

    cudaDevAttrMaxThreadsPerBlock = MAX_THREADS_PER_BLOCK


def test_device_count_and_current_device(gpu_present):
    count = gpu.getDeviceCount()
    assert count >= 1
    assert 0 <= gpu.getDevice() < count


def test_set_device_changes_the_current_device(gpu_present):
    previous = gpu.getDevice()
    last = gpu.getDeviceCount() - 1
    try:
        gpu.setDevice(last)
        assert gpu.getDevice() == last
    finally:
        gpu.setDevice(previous)
    assert gpu.getDevice() == previous


def test_unknown_device_raises(gpu_present):
    count = gpu.getDeviceCount()
    with pytest.raises(gpu.CUDARuntimeError, match="cudaErrorInvalidDevice"):
        gpu.setDevice(count)
    with pytest.raises(gpu.CUDARuntimeError, match="cudaErrorInvalidDevice"):
        gpu.getDeviceAttribute(MAX_THREADS_PER_BLOCK, count)
    with pytest.raises(gpu.CUDADriverError, match="cudaErrorInvalidDevice"):
        gpu.deviceGetName(count)


def test_attributes_by_int_and_by_enum_member(gpu_present):
    assert gpu.getDeviceAttribute(MAX_THREADS_PER_BLOCK, 0) == 1024
    assert gpu.getDeviceAttribute(DeviceAttr.cudaDevAttrMaxThreadsPerBlock, 0) == 1024
    assert gpu.getDeviceAttribute(COMPUTE_CAPABILITY_MAJOR, 0) >= 5


def test_attribute_by_cuda_python_enum(gpu_present):
    runtime = pytest.importorskip("cuda.bindings.runtime")
    attr = runtime.cudaDeviceAttr.cudaDevAttrMaxThreadsPerBlock
    assert gpu.getDeviceAttribute(attr, 0) == 1024


def test_device_properties_agree_with_the_name_and_attributes(gpu_present):
    pytest.importorskip("cuda.bindings.runtime")
    prop = gpu.getDeviceProperties(0)
    name = prop.name.decode() if isinstance(prop.name, bytes) else prop.name
    assert name.split("\0", 1)[0] == gpu.deviceGetName(0)
    assert prop.maxThreadsPerBlock == gpu.getDeviceAttribute(MAX_THREADS_PER_BLOCK, 0)
    assert prop.major == gpu.getDeviceAttribute(COMPUTE_CAPABILITY_MAJOR, 0)
    with pytest.raises(gpu.CUDARuntimeError, match="cudaErrorInvalidDevice"):
        gpu.getDeviceProperties(gpu.getDeviceCount())


def test_device_name_and_versions(gpu_present):
    name = gpu.deviceGetName(0)
    assert isinstance(name, str) and name and "\0" not in name
    assert gpu.driverGetVersion() >= 1000
    assert gpu.runtimeGetVersion() >= 1000


@pytest.fixture
def gpu_present(gpu):
    """The module under test is named `gpu`; this gives the conftest's GPU gate another name."""
