"""torch's own memory functions under crmm, without torch and without a GPU: use_crmm() points the
torch._C functions behind torch.cuda.memory_stats(), memory_allocated(), memory_summary(),
reset_peak_memory_stats(), empty_cache() and set_per_process_memory_fraction() at crmm. Here
they are called as torch calls them, over a pool of host memory standing for a device's
resource; test_torch_memory_stats_gpu.py runs torch's functions themselves on a GPU."""

import types
import warnings

import pytest

import crmm
import crmm.mr as mr
from crmm.allocators import torch as ct

MiB = 1 << 20


def flatten(nested):
    """torch.cuda.memory_stats()'s flattening of torch._C._cuda_memoryStats's answer."""
    out = {}

    def walk(prefix, obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            out[prefix] = obj

    walk("", nested)
    return out


def summary_keys():
    """Every key torch.cuda.memory_summary() reads (torch 2.11)."""
    keys = [f"{m}.{p}.{f}" for m in ct._TORCH_METRICS for p in ("all", "large_pool", "small_pool")
            for f in ("current", "peak", "allocated", "freed")]
    keys += [f"{m}.{f}" for m in ("oversize_allocations", "oversize_segments")
             for f in ("current", "peak", "allocated", "freed")]
    return keys + ["num_ooms", "num_alloc_retries"]


class ServedLib:
    """libcrmm as the routes see it, with device 0 served by the torch allocator."""

    def __init__(self, real):
        self.real = real

    def crmm_torch_device_served(self, device):
        return device == 0

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.fixture
def device0(monkeypatch):
    """A host pool standing for device 0's resource, which PyTorch has allocated on."""
    pool = crmm.mr.MemoryResource("pool", {"initial_size": "0"}, upstream=mr.HostMemoryResource())
    monkeypatch.setattr(ct, "lib", ServedLib(ct.lib))
    monkeypatch.setattr(ct, "_resource", lambda device, given: given if given is not None else pool)
    return pool


def test_the_routes_replace_what_torch_has_and_add_nothing():
    torch_c = types.SimpleNamespace(_cuda_memoryStats=None, _cuda_emptyCache=None, _cuda_other=1)
    ct._route_torch_memory_functions(torch_c)
    assert torch_c._cuda_memoryStats is ct._torch_memory_stats_nested
    assert torch_c._cuda_emptyCache is ct._torch_empty_cache
    assert torch_c._cuda_other == 1
    assert not hasattr(torch_c, "_accelerator_getDeviceStats")  # torch.accelerator's are not crmm's to answer
    assert not hasattr(torch_c, "_cuda_resetPeakMemoryStats")


def test_a_device_not_served_reads_zero_with_every_key_torch_reads():
    assert not ct.lib.crmm_torch_device_served(3)
    flat = flatten(ct._torch_memory_stats_nested(3))
    for key in summary_keys():
        assert flat[key] == 0, key
    assert not any(k.startswith("crmm.") for k in flat)


def test_the_served_devices_figures_under_torchs_keys(device0):
    a = device0.allocate(1000)
    b = device0.allocate(3 * MiB)
    device0.deallocate(b, 3 * MiB)
    ours = ct.memory_stats(0)
    flat = flatten(ct._torch_memory_stats_nested(0))
    for key in summary_keys():
        assert key in flat, key
    assert flat["allocated_bytes.all.current"] == ours["allocated_bytes.all.current"] == 1024
    assert flat["allocated_bytes.all.peak"] == 1024 + 3 * MiB
    assert flat["requested_bytes.all.current"] == 1000
    assert flat["reserved_bytes.all.current"] == device0.query("bytes_reserved") > 0
    assert flat["allocation.all.current"] == 1 and flat["allocation.all.peak"] == 2
    assert flat["active_bytes.all.current"] == flat["allocated_bytes.all.current"]
    # what crmm does not keep is 0, as under PyTorch's cudaMallocAsync backend
    assert flat["allocated_bytes.large_pool.current"] == flat["allocated_bytes.all.allocated"] == 0
    assert flat["segment.all.current"] == flat["num_ooms"] == 0
    # the pool's counters: under torch's names where they mean the same, and crmm's own
    assert flat["num_device_alloc"] == ours["crmm.pages_mapped"]
    assert flat["num_sync_all_streams"] == ours["crmm.device_syncs"]
    assert flat["crmm.growths"] == ours["crmm.growths"] >= 1
    # torch.cuda.memory_allocated() and the rest read these keys
    assert flat.get("allocated_bytes.all.current", 0) == ct.memory_allocated(0)
    assert flat.get("reserved_bytes.all.peak", 0) == ct.max_memory_reserved(0)
    device0.deallocate(a, 1000)


def test_reset_peaks_as_torch_calls_it(device0):
    a = device0.allocate(1000)
    b = device0.allocate(MiB)
    device0.deallocate(b, MiB)
    ct._torch_reset_peaks(0)
    flat = flatten(ct._torch_memory_stats_nested(0))
    assert flat["allocated_bytes.all.peak"] == flat["allocated_bytes.all.current"] == 1024
    ct._torch_reset_accumulated(0)  # nothing accumulated to reset: no error
    ct._torch_reset_peaks(5)  # a device not served: nothing to do
    device0.deallocate(a, 1000)


def test_peaks_that_cannot_be_reset_warn_once_and_stay(device0, monkeypatch):
    binned = crmm.mr.BinningMemoryResource(device0)  # a layer that serves requests itself: its own figures
    monkeypatch.setattr(ct, "_resource", lambda device, given: given if given is not None else binned)
    monkeypatch.setattr(ct, "_peaks_warned", False)
    a = binned.allocate(4096)
    binned.deallocate(a, 4096)
    peak = flatten(ct._torch_memory_stats_nested(0))["allocated_bytes.all.peak"]
    with pytest.warns(RuntimeWarning, match="reset_peak_memory_stats has no effect"):
        ct._torch_reset_peaks(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ct._torch_reset_peaks(0)  # once per process
    assert flatten(ct._torch_memory_stats_nested(0))["allocated_bytes.all.peak"] == peak


def test_empty_cache_before_torch_allocated_does_nothing():
    ct._torch_empty_cache()
    ct._torch_empty_cache((0, 1))  # a torch that names a pool


class FractionLib:
    """libcrmm as the fraction's route sees it: crmm_torch_set_memory_fraction records its arguments
    and answers `status`."""

    def __init__(self, real, status):
        self.real, self.status, self.calls = real, status, []

    def crmm_torch_set_memory_fraction(self, fraction, device):
        self.calls.append((fraction, device))
        return self.status

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_a_memory_fraction_reaches_libcrmm_for_its_device(monkeypatch):
    fake = FractionLib(ct.lib, 0)
    monkeypatch.setattr(ct, "lib", fake)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ct._torch_set_memory_fraction(0.5, 1)  # as torch.cuda calls it: a float and a device index
        ct._torch_set_memory_fraction(1, "cuda:0")
    assert fake.calls == [(0.5, 1), (1.0, 0)]
    assert all(type(f) is float for f, _ in fake.calls)


def test_a_resource_that_cannot_be_bounded_warns_once_naming_maximum_size(monkeypatch):
    monkeypatch.setattr(ct, "_fraction_warned", False)
    monkeypatch.setattr(ct, "lib", FractionLib(ct.lib, 8))  # CRMM_ERROR_UNSUPPORTED

    def unsupported(status):
        assert status == 8
        raise crmm.UnsupportedError("the resource of device 0 does not say what it holds: give its pool a "
                                    "maximum_size instead")

    monkeypatch.setattr(ct, "check", unsupported)
    with pytest.warns(RuntimeWarning, match=r"set_per_process_memory_fraction\(0.5\) has no effect.*maximum_size"):
        ct._torch_set_memory_fraction(0.5, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ct._torch_set_memory_fraction(0.25, 0)  # once per process


def test_a_fraction_libcrmm_refuses_raises(monkeypatch):
    monkeypatch.setattr(ct, "lib", FractionLib(ct.lib, 3))  # CRMM_ERROR_INVALID_ARGUMENT

    def invalid(status):
        raise crmm.InvalidArgumentError("fraction 2 is not between 0 and 1")

    monkeypatch.setattr(ct, "check", invalid)
    with pytest.raises(crmm.InvalidArgumentError, match="between 0 and 1"):
        ct._torch_set_memory_fraction(2.0, 0)
