"""Memory resources over host memory (no device needed): plugins with parameters, adaptors,
queries, and the errors for bad plugins and parameters."""

import pytest

import crmm
import crmm.mr as mr


def test_host_resource_allocates_usable_memory():
    import ctypes

    h = mr.HostMemoryResource()
    assert h.kind == "host"
    assert h.is_host_accessible and not h.is_device_accessible
    p = h.allocate(4096)
    assert p and p % 256 == 0
    ctypes.memset(p, 0x5A, 4096)
    assert ctypes.string_at(p + 4000, 4) == b"\x5a" * 4
    h.deallocate(p, 4096)


def test_zero_bytes_is_a_null_pointer():
    h = mr.HostMemoryResource()
    assert h.allocate(0) == 0
    h.deallocate(0, 0)


def test_pool_over_host_with_dict_and_string_params():
    h = mr.HostMemoryResource()
    for params in ({"initial_size": "1MiB", "maximum_size": "2MiB"}, "initial_size=1MiB maximum_size=2MiB"):
        pool = crmm.mr.MemoryResource("pool", params, upstream=h)
        assert pool.kind == "pool"
        assert pool.upstream_mr == h
        a = pool.allocate(1000)
        assert pool.query("bytes_in_use") >= 1000
        assert pool.query("maximum_size") == 2 << 20
        pool.deallocate(a, 1000)


def test_statistics_adaptor_counts():
    st = mr.StatisticsResourceAdaptor(mr.HostMemoryResource())
    ptrs = [st.allocate(100 * (i + 1)) for i in range(3)]
    assert st.query("allocations") == 3
    assert st.query("bytes_in_use") == 600
    for i, p in enumerate(ptrs):
        st.deallocate(p, 100 * (i + 1))
    assert st.query("allocations") == 0
    assert st.query("bytes_in_use_peak") == 600
    assert st.query("allocations_total") == 3


def test_limiting_adaptor_raises_memory_error():
    lim = mr.LimitingResourceAdaptor(mr.HostMemoryResource(), allocation_limit=1024)
    p = lim.allocate(1000)
    with pytest.raises(MemoryError) as info:
        lim.allocate(1000)
    assert isinstance(info.value, crmm.OutOfMemoryError)
    assert info.value.status == "CRMM_ERROR_OUT_OF_MEMORY"
    assert "out of memory" in str(info.value)
    lim.deallocate(p, 1000)
    lim.deallocate(lim.allocate(1000), 1000)


def test_unknown_plugin_is_a_plugin_error():
    with pytest.raises(crmm.PluginError, match="no_such_plugin"):
        mr.MemoryResource("no_such_plugin")


def test_unknown_parameter_is_a_config_error():
    with pytest.raises(crmm.ConfigError, match="no_such_param"):
        mr.MemoryResource("pool", {"no_such_param": 1}, upstream=mr.HostMemoryResource())


def test_bad_size_is_a_config_error():
    with pytest.raises(crmm.ConfigError):
        mr.MemoryResource("pool", {"initial_size": "lots"}, upstream=mr.HostMemoryResource())


def test_missing_upstream_is_a_config_error():
    with pytest.raises(crmm.ConfigError):
        mr.MemoryResource("pool", {"initial_size": "1MiB"})


def test_parameter_with_white_space_reaches_the_plugin_whole():
    pool = mr.MemoryResource("pool", {"initial_size": "3 MiB"}, upstream=mr.HostMemoryResource())
    assert pool.query("bytes_reserved") == 3 << 20


@pytest.mark.parametrize("args,exc", [((5,), TypeError), (("pool", 3), TypeError), (("pool", None, "host"), TypeError)])
def test_bad_argument_types(args, exc):
    with pytest.raises(exc):
        mr.MemoryResource(*args)


def test_plugin_queries_reach_their_kind_through_adaptors():
    """A pool's own figures asked of a statistics layer over it come from the pool; asked of a
    chain without a pool (or of another kind), they are refused, never answered by another kind."""
    h = mr.HostMemoryResource()
    pool = crmm.mr.MemoryResource("pool", "initial_size=1MiB", upstream=h)
    stats = crmm.mr.MemoryResource("statistics", None, upstream=pool)
    a = stats.allocate(1000)
    assert stats.query("pool_block_bytes") == 1024  # the block, rounded to 256
    assert stats.query("pool_growths") == 0
    assert stats.query("bytes_reserved") == 1 << 20  # a core query, passed down
    with pytest.raises(crmm.UnsupportedError, match="no pool layer"):
        h.query("pool_block_bytes")
    with pytest.raises(crmm.UnsupportedError, match="no async layer"):
        stats.query("async_pool_used")  # the same number as pool_device_syncs: another kind's
    stats.deallocate(a, 1000)


def test_unknown_query_names_the_known_ones():
    with pytest.raises(ValueError, match="bytes_in_use"):
        mr.HostMemoryResource().query("nothing")


def test_negative_size_is_refused():
    with pytest.raises(ValueError):
        mr.HostMemoryResource().allocate(-1)
