"""Dask's serializers for crmm's DeviceBuffer, as distributed ships them for RMM's.

distributed picks a serializer by the type's top-level module, and registers RMM's under "rmm";
crmm's DeviceBuffer lives in "crmm", so without these a worker could send one only by pickling
(through the host), and not at all where only the "cuda" family is allowed (dask-cuda's UCX
comms and spilling). Once distributed.protocol is imported (crmm waits for it, never imports it),
the four families below are registered lazily under "crmm": they are made when the first crmm
object is serialized.

  - "cuda": the buffer itself is the frame (a comm that moves device frames sends it as it is);
    deserializing takes a frame that is a DeviceBuffer as it is, and copies any other device
    frame (a comm's own buffer, a CuPy or Numba array) into a new DeviceBuffer.
  - "dask": one host frame with the contents, copied back to a new DeviceBuffer on arrival.

The header says the size, so a frame of another length is refused (ValueError) rather than
read past or cut.
"""


def cuda_serialize(buf):
    """(header, frames) of `buf` for the "cuda" family: the buffer is the one frame."""
    return {"nbytes": buf.size}, [buf]


def cuda_deserialize(header, frames):
    """The DeviceBuffer that cuda_serialize's frames describe: the frame itself when it is a
    DeviceBuffer, else a new DeviceBuffer with a copy of the device frame."""
    from .pylibrmm.device_buffer import DeviceBuffer, _device_array_pointer

    frame = _one_frame(frames)
    if isinstance(frame, DeviceBuffer):
        _check_length(header, frame.size)
        return frame
    ptr, nbytes = _device_array_pointer(frame)
    _check_length(header, nbytes)
    return DeviceBuffer(ptr=ptr, size=nbytes)


def dask_serialize(buf):
    """(header, frames) for the "dask" family: one host frame with the buffer's contents."""
    return {"nbytes": buf.size}, [memoryview(buf.copy_to_host())]


def dask_deserialize(header, frames):
    """A new DeviceBuffer with the contents of dask_serialize's host frame."""
    from .pylibrmm.device_buffer import to_device

    frame = memoryview(_one_frame(frames)).cast("B")
    _check_length(header, frame.nbytes)
    return to_device(frame)


def _one_frame(frames):
    if len(frames) != 1:
        raise ValueError(f"a crmm DeviceBuffer is serialized as one frame, not {len(frames)}")
    return frames[0]


def _check_length(header, nbytes):
    expected = header.get("nbytes")
    if expected is not None and expected != nbytes:
        raise ValueError(f"the frame holds {nbytes} bytes where the header says {expected}")


def _register_now():
    # under "crmm": distributed calls it at the first crmm object it serializes
    from distributed.protocol.cuda import cuda_deserialize as cuda_de, cuda_serialize as cuda_se
    from distributed.protocol.serialize import dask_deserialize as dask_de, dask_serialize as dask_se

    from .pylibrmm.device_buffer import DeviceBuffer

    cuda_se.register(DeviceBuffer)(cuda_serialize)
    cuda_de.register(DeviceBuffer)(cuda_deserialize)
    dask_se.register(DeviceBuffer)(dask_serialize)
    dask_de.register(DeviceBuffer)(dask_deserialize)


def register_lazily(_protocol=None):
    """Have distributed register the serializers above when it first meets a crmm object. It runs
    inside `import distributed`, so it never raises: with a distributed that lacks these
    dispatchers it warns (RuntimeWarning) and registers nothing; DeviceBuffers then travel
    pickled, through the host."""
    try:
        from distributed.protocol.cuda import cuda_deserialize as cuda_de, cuda_serialize as cuda_se
        from distributed.protocol.serialize import dask_deserialize as dask_de, dask_serialize as dask_se

        for dispatch in (cuda_se, cuda_de, dask_se, dask_de):
            dispatch.register_lazy("crmm", _register_now)
    except Exception as e:  # noqa: BLE001 (importing distributed must not fail because of crmm)
        import warnings

        warnings.warn(f"crmm: Dask serializers for DeviceBuffer not registered ({type(e).__name__}: {e}); "
                      "DeviceBuffers will be pickled", RuntimeWarning, stacklevel=2)
