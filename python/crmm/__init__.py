"""crmm: GPU memory resources as plugins, from Python (RMM's `rmm` API over libcrmm).

``import crmm as rmm`` runs code written for RMM's pylibrmm: DeviceBuffer, the copy helpers,
streams, memory resources (crmm.mr) and logging. The config file ($CRMM_CONFIG, else the
installed crmm.ini) chooses each device's resource, as for C programs; crmm.initialize(path)
loads another one before first use. Framework allocators: crmm.allocators.cupy, .numba, .torch.
"""

from . import _cuda, mr, pylibrmm, statistics
from . import ipc
from ._errors import (
    BadAllocError,
    ConfigError,
    CrmmError,
    CrmmIOError,
    CudaError,
    InvalidArgumentError,
    NotFoundError,
    OutOfMemoryError,
    PluginError,
    RMMError,
    StateError,
    UnsupportedError,
)
from . import _lib
from ._host import bool_arg as _bool_arg
from ._lib import initialize, library_path
from ._rmm_alias import install_as_rmm, is_installed_as_rmm, uninstall_as_rmm
from ._reinitialize import register_reinitialize_hook, reinitialize, unregister_reinitialize_hook
from .pylibrmm.device_buffer import DeviceBuffer
from .pylibrmm.logger import (
    disable_logging,
    enable_logging,
    flush_logger,
    get_flush_level,
    get_log_filenames,
    get_logging_level,
    level_enum,
    set_flush_level,
    set_logging_level,
    should_log,
)
from .pylibrmm.memory_resource import is_initialized


def enable_graph_capture(enable=True):
    """Say that streams may be captured into CUDA graphs in this process (docs/cuda-graphs.md):
    crmm's pool (graphs = auto) then asks CUDA, on each allocate and free, whether the stream is
    being captured, and keeps what a capture allocates or frees for the graph. The PyTorch, CuPy
    and Numba integrations call it; call it before capturing with DeviceBuffers of your own."""
    _lib.lib.crmm_graph_capture_enable(_bool_arg(enable, "enable"))


def graph_capture_enabled():
    """Whether enable_graph_capture(True) is in force."""
    return bool(_lib.lib.crmm_graph_capture_enabled())


__version__ = _lib.text(_lib.lib.crmm_version())

# Dask's serializers for DeviceBuffer, once something imports distributed (crmm never does)
from ._after_import import after_import as _when_imported  # noqa: E402
from ._dask_serialize import register_lazily as _register_dask_serializers  # noqa: E402

_when_imported("distributed.protocol", _register_dask_serializers)

try:  # the commit `make install` was run from ("" outside a git checkout or uninstalled)
    from ._paths import GIT_COMMIT as __git_commit__
except ImportError:
    __git_commit__ = ""

# RMM's package imports these two modules in its __init__, so that after `import rmm` alone
# rmm.rmm (reinitialize, its hooks, RMMError, is_initialized) and rmm._version are attributes.
from . import _version, rmm  # noqa: E402,F401

__all__ = [
    "BadAllocError",
    "ConfigError",
    "CrmmError",
    "CrmmIOError",
    "CudaError",
    "DeviceBuffer",
    "InvalidArgumentError",
    "NotFoundError",
    "OutOfMemoryError",
    "PluginError",
    "RMMError",
    "StateError",
    "UnsupportedError",
    "disable_logging",
    "enable_graph_capture",
    "graph_capture_enabled",
    "enable_logging",
    "flush_logger",
    "get_flush_level",
    "get_log_filenames",
    "get_logging_level",
    "initialize",
    "install_as_rmm",
    "is_installed_as_rmm",
    "uninstall_as_rmm",
    "is_initialized",
    "level_enum",
    "library_path",
    "mr",
    "pylibrmm",
    "register_reinitialize_hook",
    "reinitialize",
    "unregister_reinitialize_hook",
    "set_flush_level",
    "set_logging_level",
    "should_log",
    "statistics",
]
