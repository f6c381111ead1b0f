"""Switch PyTorch to crmm through torch.cuda.memory.CUDAPluggableAllocator (the benchmarks' own
small shim, so that they run from a build tree; users call crmm.allocators.torch instead).

use_crmm(libcrmm, config_text) writes the config to a file, points $CRMM_CONFIG at it and swaps
PyTorch's allocator; it must run before the process's first CUDA allocation."""
import os
import tempfile

import torch


def use_crmm(libcrmm, config_text):
    fd, path = tempfile.mkstemp(prefix="crmm-bench-", suffix=".ini")
    with os.fdopen(fd, "w") as f:
        f.write(config_text)
    os.environ["CRMM_CONFIG"] = path
    alloc = torch.cuda.memory.CUDAPluggableAllocator(libcrmm, "crmm_torch_allocate", "crmm_torch_deallocate")
    torch.cuda.memory.change_current_allocator(alloc)
    return path


def pool_config(log_file=None, expandable=True, extra=""):
    """A GPU pool over cudaMalloc (expandable or doubling), with a logging layer on top when
    log_file is given."""
    text = ("[crmm]\ndefault = %s\nlog_level = warn\n\n[resource.gpu]\nplugin = cuda\n\n"
            "[resource.pool]\nplugin = pool\nupstream = gpu\n" % ("rec" if log_file else "pool"))
    text += "expandable = true\n" if expandable else "initial_size = 0\n"
    text += extra
    if log_file:
        text += "\n[resource.rec]\nplugin = logging\nupstream = pool\nfile = %s\nauto_flush = true\n" % log_file
    return text
