"""BinningMemoryResource.add_bin and bin_mrs (RMM's API) over host memory: added bins serve the
requests up to their size, a given resource is the same object in bin_mrs, a size already binned
keeps its bin, bad sizes and bad resources are refused."""

import gc

import pytest

import crmm
from crmm import mr


def _allocations(resource):
    return resource.query("allocations")


def test_added_bins_serve_requests_up_to_their_size():
    host = mr.HostMemoryResource()
    binning = mr.BinningMemoryResource(host)
    mine = mr.FixedSizeMemoryResource(host, block_size=4096, blocks_to_preallocate=1)
    binning.add_bin(4096, mine)
    binning.add_bin(1000)  # a fixed-size bin of 1024 over the upstream
    assert binning.bin_mrs == [mine]
    assert binning.bin_mrs[0] is mine
    sizes = [1, 1024, 1025, 4096, 4097]
    ptrs = [binning.allocate(n) for n in sizes]
    assert _allocations(mine) == 2  # 1025 and 4096; 1 and 1024 went to the 1 KiB bin, 4097 upstream
    assert _allocations(binning) == 5
    for p, n in zip(ptrs, sizes):
        binning.deallocate(p, n)
    assert _allocations(mine) == 0


def test_a_size_already_binned_keeps_its_bin():
    host = mr.HostMemoryResource()
    binning = mr.BinningMemoryResource(host, 10, 12)  # bins of 1, 2 and 4 KiB
    other = mr.FixedSizeMemoryResource(host, block_size=4096, blocks_to_preallocate=1)
    binning.add_bin(4000, other)  # 4000 rounds up to 4096, which has a bin
    assert binning.bin_mrs == []
    p = binning.allocate(3000)
    assert _allocations(other) == 0
    binning.deallocate(p, 3000)


def test_the_bin_resource_lives_as_long_as_the_binning():
    host = mr.HostMemoryResource()
    binning = mr.BinningMemoryResource(host)
    binning.add_bin(8192, mr.FixedSizeMemoryResource(host, block_size=8192, blocks_to_preallocate=1))
    gc.collect()
    p = binning.allocate(5000)
    assert _allocations(binning.bin_mrs[0]) == 1
    binning.deallocate(p, 5000)


@pytest.mark.parametrize("size", [0, (1 << 63) + 1])
def test_bad_sizes_are_refused(size):
    binning = mr.BinningMemoryResource(mr.HostMemoryResource())
    with pytest.raises(ValueError, match="add_bin"):
        binning.add_bin(size)
    assert binning.bin_mrs == []


def test_bad_arguments_are_refused():
    binning = mr.BinningMemoryResource(mr.HostMemoryResource())
    with pytest.raises(ValueError):
        binning.add_bin(-1)
    with pytest.raises(TypeError):
        binning.add_bin(256, "not a resource")
    with pytest.raises(TypeError):
        binning.add_bin("256")
    assert binning.bin_mrs == []
    assert isinstance(crmm.mr.BinningMemoryResource(mr.HostMemoryResource()).bin_mrs, list)


@pytest.mark.parametrize("exponents,exc", [
    (("10", 12), TypeError), ((10.0, 12), TypeError), ((10, [12]), TypeError),  # RMM's int8_t argument
    ((200, 300), OverflowError), ((10, -129), OverflowError),
])
def test_binning_exponents_that_are_no_int8_are_refused_as_rmm_refuses_them(exponents, exc):
    with pytest.raises(exc):
        mr.BinningMemoryResource(mr.HostMemoryResource(), *exponents)


def test_a_bool_exponent_is_the_int_it_is():
    binning = mr.BinningMemoryResource(mr.HostMemoryResource(), True, 3)  # 2**1 .. 2**3
    ptr = binning.allocate(2)
    binning.deallocate(ptr, 2)
