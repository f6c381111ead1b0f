"""crmm.reinitialize on a device: the resource it builds becomes the device's, of RMM's class,
and the hooks run before it."""

import os

import pytest

import crmm
import crmm.mr as mr


@pytest.fixture(autouse=True)
def restore(gpu):
    yield
    crmm.reinitialize()


def test_default_is_plain_cuda_memory(gpu):
    crmm.reinitialize()
    assert type(mr.get_current_device_resource()) is mr.CudaMemoryResource


def test_pool_over_cuda_memory_of_the_given_sizes(gpu):
    crmm.reinitialize(pool_allocator=True, initial_pool_size="64MiB", maximum_pool_size=128 << 20)
    pool = mr.get_current_device_resource()
    assert type(pool) is mr.PoolMemoryResource
    assert type(pool.upstream_mr) is mr.CudaMemoryResource
    assert pool.pool_size() == 64 << 20
    db = crmm.DeviceBuffer(size=1 << 20)
    assert db.mr is pool
    with pytest.raises(MemoryError):
        crmm.DeviceBuffer(size=256 << 20)


def test_pool_over_managed_memory(gpu):
    crmm.reinitialize(pool_allocator=True, managed_memory=True, initial_pool_size="16MiB")
    pool = mr.get_current_device_resource()
    assert type(pool.upstream_mr) is mr.ManagedMemoryResource


def test_logging_writes_rmm_s_per_device_file(gpu, tmp_path):
    name = tmp_path / "alloc.csv"
    crmm.reinitialize(logging=True, log_file_name=str(name))
    logged = mr.get_current_device_resource()
    assert type(logged) is mr.LoggingResourceAdaptor
    expected = str(tmp_path / "alloc.dev0.csv")
    assert logged.get_file_name() == expected
    db = crmm.DeviceBuffer(size=100)
    del db
    logged.flush()
    text = open(expected).read()
    assert text.startswith("Thread,Time,Action,Pointer,Size,Stream")
    assert ",allocate," in text and ",free," in text


def test_hooks_run_before_the_new_resource(gpu):
    seen = []

    def hook():
        seen.append(type(mr.get_current_device_resource()))

    crmm.reinitialize(pool_allocator=True, initial_pool_size="16MiB")
    crmm.register_reinitialize_hook(hook)
    try:
        crmm.reinitialize()
    finally:
        crmm.unregister_reinitialize_hook(hook)
    assert seen == [mr.PoolMemoryResource]
    assert type(mr.get_current_device_resource()) is mr.CudaMemoryResource


def test_a_device_that_does_not_exist_changes_nothing(gpu):
    crmm.reinitialize(pool_allocator=True, initial_pool_size="16MiB")
    before = mr.get_current_device_resource()
    with pytest.raises(crmm.CrmmError):
        crmm.reinitialize(devices=[0, 4096])
    assert mr.get_current_device_resource() is before


def test_devices_none_is_device_0_as_in_rmm(gpu):
    crmm.reinitialize(pool_allocator=True, initial_pool_size="16MiB", devices=None)
    pool = mr.get_per_device_resource(0)
    assert type(pool) is mr.PoolMemoryResource and pool.pool_size() == 16 << 20
