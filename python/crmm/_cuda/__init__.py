"""rmm._cuda: small CUDA helpers of RMM's Python package (see gpu)."""

from . import gpu
