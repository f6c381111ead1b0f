"""Objects are what they are (no device needed): the upstream given is the upstream returned,
resources built in C (from the config, an upstream) get the class of their plugin, and RMM's
base classes are there for isinstance checks."""

import gc

import pytest

from conftest import host_config, run_python

import crmm.mr as mr


def test_the_upstream_given_is_the_upstream_returned():
    h = mr.HostMemoryResource()
    pool = mr.PoolMemoryResource(h, initial_pool_size="1MiB")
    stats = mr.StatisticsResourceAdaptor(pool)
    assert stats.upstream_mr is pool and stats.get_upstream() is pool
    assert pool.upstream_mr is h
    # a resource without an upstream has no such attribute, as in RMM (only adaptors have it)
    assert not hasattr(h, "upstream_mr")
    with pytest.raises(AttributeError, match="no upstream"):
        h.get_upstream()


def test_a_chain_walked_as_rmm_users_walk_it_ends_at_its_last_resource():
    """The idiom of cudf, dask-cuda and distributed: follow upstream_mr while the attribute is there."""

    def stack(res):
        return [res] + stack(res.upstream_mr) if hasattr(res, "upstream_mr") else [res]

    h = mr.HostMemoryResource()
    pool = mr.PoolMemoryResource(h, initial_pool_size="1MiB")
    stats = mr.StatisticsResourceAdaptor(pool)
    assert stack(stats) == [stats, pool, h]


def test_an_upstream_outlives_the_name_it_was_given():
    stats = mr.StatisticsResourceAdaptor(mr.LimitingResourceAdaptor(mr.HostMemoryResource(), 1 << 20))
    gc.collect()
    up = stats.upstream_mr
    assert type(up) is mr.LimitingResourceAdaptor
    assert up.get_allocation_limit() == 1 << 20
    assert type(up.upstream_mr) is mr.HostMemoryResource


def test_classes_have_rmm_s_bases():
    assert mr.DeviceMemoryResource is mr.MemoryResource
    for cls in (mr.PoolMemoryResource, mr.ArenaMemoryResource, mr.FixedSizeMemoryResource, mr.BinningMemoryResource,
                mr.LimitingResourceAdaptor, mr.LoggingResourceAdaptor, mr.StatisticsResourceAdaptor,
                mr.TrackingResourceAdaptor, mr.PrefetchResourceAdaptor):
        assert issubclass(cls, mr.UpstreamResourceAdaptor), cls
    for cls in (mr.CudaMemoryResource, mr.ManagedMemoryResource, mr.HostMemoryResource, mr.CudaAsyncMemoryResource,
                mr.PinnedHostMemoryResource):
        assert issubclass(cls, mr.DeviceMemoryResource) and not issubclass(cls, mr.UpstreamResourceAdaptor), cls
    assert mr.PinnedMemoryResource is mr.PinnedHostMemoryResource


def test_a_resource_made_by_plugin_name_is_of_the_generic_class():
    h = mr.MemoryResource("host")
    assert type(h) is mr.MemoryResource
    stats = mr.MemoryResource("statistics", None, upstream=h)
    assert stats.upstream_mr is h


def test_every_plugin_class_is_listed_once():
    classes = list(mr.PLUGIN_CLASSES.values())
    assert len(classes) == len(set(classes))


def test_resources_from_the_config_get_their_plugin_s_class(tmp_path):
    path = host_config(
        tmp_path,
        """
        [resource.h]
        plugin = host
        [resource.pool]
        plugin = pool
        upstream = h
        initial_size = 1MiB
        [resource.limit]
        plugin = limiting
        upstream = pool
        allocation_limit = 64KiB
        [resource.track]
        plugin = tracking
        upstream = limit
        [resource.stats]
        plugin = statistics
        upstream = track
        """,
    )
    r = run_python(
        """
        import crmm.mr as mr
        s = mr.MemoryResource.from_config("stats", device=0)
        assert type(s) is mr.StatisticsResourceAdaptor, type(s)
        t = s.upstream_mr
        assert type(t) is mr.TrackingResourceAdaptor and s.get_upstream() is t, type(t)
        lim = t.upstream_mr
        assert type(lim) is mr.LimitingResourceAdaptor and lim.get_allocation_limit() == 64 << 10
        pool = lim.upstream_mr
        assert type(pool) is mr.PoolMemoryResource and pool.pool_size() == 1 << 20
        assert type(pool.upstream_mr) is mr.HostMemoryResource and not hasattr(pool.upstream_mr, "upstream_mr")
        p = s.allocate(1000)
        assert t.get_allocated_bytes() == 1000 and lim.get_allocated_bytes() >= 1000
        s.deallocate(p, 1000)
        print("ok")
        """,
        env={"CRMM_CONFIG": path},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
