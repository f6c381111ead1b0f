"""Allocators that make CuPy, Numba and PyTorch take their GPU memory from crmm. Each module
imports its framework only when it is itself imported."""
