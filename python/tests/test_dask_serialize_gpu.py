"""Dask's serializers for crmm's DeviceBuffer on a device: the "dask" family's copies through
the host and the "cuda" family's copy of a foreign device frame. The functions are called as
distributed calls them (test_dask_serialize.py checks that it finds them), so these run without
distributed too."""

import numpy as np

from crmm import _dask_serialize
from crmm.pylibrmm.device_buffer import DeviceBuffer


class ForeignFrame:
    """Device memory as a comm's receive buffer or a CuPy array shows it: only its
    __cuda_array_interface__ (bytes of `owner`, a DeviceBuffer kept alive here)."""

    def __init__(self, owner):
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": (owner.size,), "typestr": "|u1", "data": (owner.ptr, False),
                                         "version": 3, "strides": None}


def test_the_dask_family_round_trips_the_contents(gpu):
    data = np.random.default_rng(7).integers(0, 256, 1 << 20, dtype=np.uint8)
    buf = DeviceBuffer.to_device(data)
    header, frames = _dask_serialize.dask_serialize(buf)
    assert len(frames) == 1 and isinstance(frames[0], memoryview) and frames[0].nbytes == data.nbytes
    back = _dask_serialize.dask_deserialize(header, [bytes(frames[0])])
    assert back.ptr != buf.ptr and back.size == buf.size
    assert np.array_equal(back.copy_to_host(), data)


def test_the_dask_family_round_trips_an_empty_buffer(gpu):
    header, frames = _dask_serialize.dask_serialize(DeviceBuffer(size=0))
    assert _dask_serialize.dask_deserialize(header, frames).size == 0


def test_the_cuda_family_copies_a_foreign_device_frame(gpu):
    data = np.arange(3000, dtype=np.uint8)
    source = DeviceBuffer.to_device(data)
    back = _dask_serialize.cuda_deserialize({"nbytes": 3000}, [ForeignFrame(source)])
    assert isinstance(back, DeviceBuffer) and back.ptr != source.ptr
    assert np.array_equal(back.copy_to_host(), data)
