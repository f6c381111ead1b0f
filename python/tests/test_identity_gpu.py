"""The resource set is the resource got back: same object, own class, with the config's
default of its plugin's class, and device buffers naming it."""

import pytest

from conftest import run_python

import crmm
import crmm.mr as mr


@pytest.fixture
def restore(gpu):
    before = mr.get_current_device_resource()
    yield
    mr.set_current_device_resource(before)


def test_the_resource_set_is_the_resource_got(restore):
    pool = mr.PoolMemoryResource(mr.CudaMemoryResource(), initial_pool_size="16MiB")
    mr.set_current_device_resource(pool)
    assert mr.get_current_device_resource() is pool
    assert mr.get_per_device_resource(0) is pool
    assert type(mr.get_current_device_resource()) is mr.PoolMemoryResource
    assert crmm.DeviceBuffer(size=10).mr is pool


def test_the_set_resource_stays_alive_without_other_references(restore):
    mr.set_current_device_resource(mr.StatisticsResourceAdaptor(mr.CudaMemoryResource()))
    import gc

    gc.collect()
    got = mr.get_current_device_resource()
    assert type(got) is mr.StatisticsResourceAdaptor
    db = crmm.DeviceBuffer(size=256)
    assert got.allocation_counts.current_bytes >= 256
    del db


def test_per_device_set_and_get(restore):
    res = mr.CudaMemoryResource()
    mr.set_per_device_resource(0, res)
    assert mr.get_per_device_resource(0) is res
    assert type(mr.get_per_device_resource(0)) is mr.CudaMemoryResource


def test_the_config_default_has_its_plugin_s_class(gpu, tmp_path):
    path = tmp_path / "crmm.ini"
    path.write_text("[crmm]\ndefault = main\n[resource.c]\nplugin = cuda\n[resource.main]\nplugin = pool\nupstream = c\ninitial_size = 16MiB\n")
    r = run_python(
        """
        import crmm.mr as mr
        a = mr.get_current_device_resource()
        assert type(a) is mr.PoolMemoryResource, type(a)
        assert mr.get_current_device_resource() is a
        assert type(a.upstream_mr) is mr.CudaMemoryResource
        assert a.pool_size() == 16 << 20
        print("ok")
        """,
        env={"CRMM_CONFIG": str(path)},
    )
    assert r.returncode == 0, r.stderr


def test_the_set_resource_comes_back_after_logging_wrapped_it(restore, tmp_path):
    import gc

    mr.set_current_device_resource(mr.PoolMemoryResource(mr.CudaMemoryResource(), initial_pool_size="16MiB"))
    pool_id = id(mr.get_current_device_resource())
    crmm.enable_logging(str(tmp_path / "log.csv"))
    try:
        logged = mr.get_current_device_resource()
        assert type(logged) is mr.LoggingResourceAdaptor
        assert id(logged.upstream_mr) == pool_id
        del logged
        gc.collect()
    finally:
        crmm.disable_logging()
    back = mr.get_current_device_resource()
    assert type(back) is mr.PoolMemoryResource and id(back) == pool_id
