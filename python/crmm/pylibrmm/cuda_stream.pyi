from .stream import CudaStreamFlags as CudaStreamFlags
from .stream import Stream as CudaStream

__all__ = ["CudaStream", "CudaStreamFlags"]
