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

__all__ = ["rmm_torch_allocator", "crmm_torch_allocator", "use_crmm"]

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
