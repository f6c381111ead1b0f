"""crmm.allocators.torch.memory_stats() and reset_peak_memory_stats() on resources over host
memory (no device, no torch needed): torch's key names, peaks that reset, the pool's device
counters, and the errors."""

import pytest

import crmm
import crmm.mr as mr
from crmm.allocators import torch as ct


def host_pool(**params):
    return crmm.mr.MemoryResource("pool", params or {"initial_size": "0"}, upstream=mr.HostMemoryResource())


def test_stats_under_torchs_names():
    pool = host_pool()
    a = pool.allocate(1000)
    b = pool.allocate(3 << 20)
    s = ct.memory_stats(mr=pool)
    assert s["allocated_bytes.all.current"] == 1024 + (3 << 20)  # blocks: requests rounded to 256
    assert s["requested_bytes.all.current"] == 1000 + (3 << 20)
    assert s["active_bytes.all.current"] == s["allocated_bytes.all.current"]
    assert s["allocation.all.current"] == 2
    assert s["reserved_bytes.all.current"] == pool.query("bytes_reserved") >= s["allocated_bytes.all.current"]
    assert s["crmm.device_syncs"] == 0 and s["crmm.pages_mapped"] == 0  # host memory: no device call
    assert s["crmm.growths"] >= 1
    assert s["crmm.thread_caches"] == 0 and s["crmm.lock_waits"] == 0  # one thread: no contention
    assert s["crmm.plan_hits"] == 0 and s["crmm.plan_misses"] == 0  # no plan
    pool.deallocate(b, 3 << 20)
    s = ct.memory_stats(mr=pool)
    assert s["allocated_bytes.all.current"] == 1024
    assert s["allocated_bytes.all.peak"] == 1024 + (3 << 20)
    assert s["requested_bytes.all.peak"] == 1000 + (3 << 20)
    assert s["allocation.all.peak"] == 2
    assert ct.memory_allocated(mr=pool) == 1024
    assert ct.max_memory_allocated(mr=pool) == 1024 + (3 << 20)
    assert ct.memory_reserved(mr=pool) == s["reserved_bytes.all.current"]
    assert ct.max_memory_reserved(mr=pool) == s["reserved_bytes.all.peak"]
    pool.deallocate(a, 1000)


def test_reset_peak_memory_stats_sets_peaks_to_current():
    pool = host_pool()
    a = pool.allocate(1000)
    b = pool.allocate(1 << 20)
    pool.deallocate(b, 1 << 20)
    ct.reset_peak_memory_stats(mr=pool)
    s = ct.memory_stats(mr=pool)
    for key in ("allocated_bytes.all", "requested_bytes.all", "reserved_bytes.all", "allocation.all"):
        assert s[key + ".peak"] == s[key + ".current"], key
    c = pool.allocate(5000)  # later use raises them again
    assert ct.max_memory_allocated(mr=pool) == 1024 + 5120
    pool.deallocate(c, 5000)
    pool.deallocate(a, 1000)


def test_a_pool_under_an_adaptor_is_found():
    pool = host_pool()
    stats = crmm.mr.StatisticsResourceAdaptor(pool)
    a = stats.allocate(1 << 20)
    stats.deallocate(a, 1 << 20)
    ct.reset_peak_memory_stats(mr=stats)
    assert ct.memory_stats(mr=pool)["requested_bytes.all.peak"] == 0
    # asked of the adaptor, the figures are the pool's too: every peak reset, none above its current
    a = stats.allocate(100)
    b = stats.allocate(50000)
    stats.deallocate(b, 50000)
    ct.reset_peak_memory_stats(mr=stats)
    s = ct.memory_stats(mr=stats)
    for key in ("allocated_bytes.all", "requested_bytes.all", "reserved_bytes.all", "allocation.all", "active.all"):
        assert s[key + ".peak"] == s[key + ".current"], key
    assert s["requested_bytes.all.current"] == 100 and s["allocation.all.current"] == 1
    stats.deallocate(a, 100)


def test_a_binning_over_a_pool_counts_every_bin():
    """A binning serves small requests from bins of its own: its figures, not the pool's."""
    pool = host_pool()
    binning = mr.BinningMemoryResource(pool)
    binning.add_bin(1024, mr.HostMemoryResource())
    blocks = [binning.allocate(1000) for _ in range(10)] + [binning.allocate(1 << 20)]
    s = ct.memory_stats(mr=binning)
    assert s["allocation.all.current"] == 11
    assert s["requested_bytes.all.current"] == 10 * 1000 + (1 << 20)
    for b in blocks[:10]:
        binning.deallocate(b, 1000)
    binning.deallocate(blocks[10], 1 << 20)


def test_a_resource_without_a_pool():
    h = mr.HostMemoryResource()
    a = h.allocate(4096)
    s = ct.memory_stats(mr=h)
    assert s["allocated_bytes.all.current"] == 4096  # no blocks of its own: the bytes asked for
    assert not any(k.startswith("crmm.") for k in s)
    with pytest.raises(crmm.UnsupportedError, match="no pool"):
        ct.reset_peak_memory_stats(mr=h)
    h.deallocate(a, 4096)


@pytest.mark.parametrize("device", ["cpu", 1.5, True, "cuda:x"])
def test_bad_devices_are_refused(device):
    with pytest.raises((TypeError, ValueError)):
        ct.memory_stats(device)


def test_a_binning_over_a_pool_counts_its_bins_in_allocated_bytes():
    """Blocks in a binning's other bins are allocated too: allocated_bytes is never below the
    bytes requested (the pool's blocks alone were 0 here)."""
    pool = host_pool()
    binning = mr.BinningMemoryResource(pool)
    binning.add_bin(1024, mr.HostMemoryResource())
    blocks = [binning.allocate(1000) for _ in range(10)]
    s = ct.memory_stats(mr=binning)
    assert s["allocated_bytes.all.current"] == s["requested_bytes.all.current"] == 10 * 1000
    assert s["active_bytes.all.current"] == s["allocated_bytes.all.current"]
    assert ct.memory_allocated(mr=binning) == 10 * 1000
    for b in blocks:
        binning.deallocate(b, 1000)


def test_reset_is_refused_where_the_figures_are_not_the_pools():
    """Over a binning, memory_stats() reads the statistics adaptor on top, whose peaks no reset
    reaches: resetting the pool below said nothing and left max_memory_allocated() as it was."""
    pool = host_pool()
    binning = mr.BinningMemoryResource(pool)
    binning.add_bin(1024, mr.HostMemoryResource())
    stats = mr.StatisticsResourceAdaptor(binning)
    a = stats.allocate(1 << 20)
    stats.deallocate(a, 1 << 20)
    assert ct.max_memory_allocated(mr=stats) == 1 << 20
    for top in (stats, binning):
        with pytest.raises(crmm.UnsupportedError, match="cannot be reset"):
            ct.reset_peak_memory_stats(mr=top)
    assert ct.max_memory_allocated(mr=stats) == 1 << 20


_BY_RESOURCE = [ct.memory_stats, ct.reset_peak_memory_stats, ct.memory_allocated, ct.max_memory_allocated,
                ct.memory_reserved, ct.max_memory_reserved]


@pytest.mark.parametrize("func", _BY_RESOURCE, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bad", ["pool", 3, True, object()], ids=["str", "int", "bool", "object"])
def test_a_resource_of_the_wrong_kind_is_a_type_error_naming_mr(func, bad):
    """As set_current_device_resource and DeviceBuffer refuse it: a TypeError naming `mr`, not an
    AttributeError from the first method called on it."""
    with pytest.raises(TypeError, match="mr must be a MemoryResource, not"):
        func(mr=bad)


@pytest.mark.parametrize("device", ["cuda:x", "cuda:", "cuda:1.0"])
def test_a_device_string_without_a_number_is_a_value_error_naming_device(device):
    with pytest.raises(ValueError, match="device must be 'cuda' or 'cuda:N'"):
        ct.memory_stats(device)
