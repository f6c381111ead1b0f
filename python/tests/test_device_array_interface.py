"""The __cuda_array_interface__ of a source given to DeviceBuffer.copy_from_device: its fields are
checked before anything is copied, as RMM converts them to uintptr_t and size_t (no device
needed: every case is refused before the copy)."""

import numpy as np
import pytest

from crmm.mr import CallbackMemoryResource
from crmm.pylibrmm.device_buffer import DeviceBuffer


class DeviceArray:
    def __init__(self, data, shape, typestr="|u1", strides=None):
        self.__cuda_array_interface__ = {
            "data": (data, False), "shape": shape, "typestr": typestr, "strides": strides, "version": 3,
        }


def host_as_device():
    """A callback resource over numpy host memory (libcrmm takes a callback resource's memory as
    device memory, so DeviceBuffer allocates from it without a GPU)."""
    live = {}

    def allocate(nbytes, stream):
        block = np.empty(nbytes + 256, dtype=np.uint8)
        ptr = (block.ctypes.data + 255) // 256 * 256
        live[ptr] = block
        return ptr

    return CallbackMemoryResource(allocate, lambda ptr, nbytes, stream: live.pop(ptr))


@pytest.fixture
def buffer():
    return DeviceBuffer._uninitialized(64, mr=host_as_device())


@pytest.mark.parametrize("shape", [(1 << 62, 4), (1 << 32, 1 << 32), (1 << 63, 2, 1)])
def test_a_shape_whose_byte_count_passes_64_bits_is_too_large(buffer, shape):
    # the count is not wrapped to 64 bits (2**64 bytes would be 0: a copy of nothing)
    db = buffer
    with pytest.raises(ValueError, match="more than the buffer"):
        db.copy_from_device(DeviceArray(0x10000, shape))


def test_a_negative_extent_is_refused(buffer):
    db = buffer
    with pytest.raises(ValueError, match="negative"):
        db.copy_from_device(DeviceArray(0x10000, (-1,)))


@pytest.mark.parametrize("data,exc", [(1 << 64, OverflowError), (1 << 70, OverflowError), (-1, OverflowError),
                                      (1.5, TypeError), ("4096", TypeError)])
def test_a_data_pointer_that_is_no_address_is_refused(buffer, data, exc):
    # RMM converts it to uintptr_t: never cut to 64 bits (2**64 would be NULL, -1 a wild address)
    with pytest.raises(exc):
        buffer.copy_from_device(DeviceArray(data, (2,)))
