"""PyTorch allocator: ``crmm.allocators.torch.use_crmm()`` makes every CUDA tensor's memory come
from the current crmm resource of its device, through torch's CUDAPluggableAllocator over
libcrmm's crmm_torch_allocate / crmm_torch_deallocate. Call it before torch first allocates CUDA
memory (torch refuses to change its allocator afterwards).

The module imports without PyTorch: rmm_torch_allocator is then None (as in RMM) and use_crmm()
raises ModuleNotFoundError naming torch."""

from .._lib import library_path

try:
    from torch.cuda.memory import CUDAPluggableAllocator, change_current_allocator
except ImportError:
    CUDAPluggableAllocator = change_current_allocator = None

__all__ = ["rmm_torch_allocator", "crmm_torch_allocator", "use_crmm", "crmm_mem_pool"]

# The allocator object, as RMM's rmm_torch_allocator: torch.cuda.memory.change_current_allocator(it).
if CUDAPluggableAllocator is not None:
    rmm_torch_allocator = CUDAPluggableAllocator(library_path, "crmm_torch_allocate", "crmm_torch_deallocate")
else:
    rmm_torch_allocator = None
crmm_torch_allocator = rmm_torch_allocator


def use_crmm():
    """Switch PyTorch to crmm. Raises ModuleNotFoundError without PyTorch, RuntimeError (from
    torch) when torch has already allocated CUDA memory with its own allocator."""
    if change_current_allocator is None:
        raise ModuleNotFoundError("No module named 'torch': use_crmm needs PyTorch", name="torch")
    change_current_allocator(rmm_torch_allocator)


def crmm_mem_pool(**kwargs):
    """A ``torch.cuda.MemPool`` whose segments come from crmm (the current resource of the
    device), for ``torch.cuda.use_mem_pool(pool)`` and ``torch.cuda.graph(g, pool=pool.id)``:
    PyTorch caches blocks inside the pool, crmm gives it its memory. Needs no ``use_crmm()``.
    Keyword arguments go to ``torch.cuda.MemPool`` (e.g. ``use_on_oom``)."""
    import torch

    return torch.cuda.MemPool(rmm_torch_allocator.allocator(), **kwargs)
