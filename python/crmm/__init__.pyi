from os import PathLike
from typing import Any, Callable, TypeVar

from . import mr as mr, pylibrmm as pylibrmm, rmm as rmm, statistics as statistics
from ._errors import (
    BadAllocError as BadAllocError,
    ConfigError as ConfigError,
    CrmmError as CrmmError,
    CrmmIOError as CrmmIOError,
    CudaError as CudaError,
    InvalidArgumentError as InvalidArgumentError,
    NotFoundError as NotFoundError,
    OutOfMemoryError as OutOfMemoryError,
    PluginError as PluginError,
    RMMError as RMMError,
    StateError as StateError,
    UnsupportedError as UnsupportedError,
)
from .pylibrmm.device_buffer import DeviceBuffer as DeviceBuffer
from .pylibrmm.logger import (
    disable_logging as disable_logging,
    enable_logging as enable_logging,
    flush_logger as flush_logger,
    get_flush_level as get_flush_level,
    get_log_filenames as get_log_filenames,
    get_logging_level as get_logging_level,
    level_enum as level_enum,
    set_flush_level as set_flush_level,
    set_logging_level as set_logging_level,
    should_log as should_log,
)

_F = TypeVar("_F", bound=Callable[..., Any])

__version__: str
__git_commit__: str
library_path: str

def initialize(path: str | bytes | PathLike[str] | None = None) -> None: ...
def is_initialized() -> bool: ...
def enable_graph_capture(enable: bool = True) -> None: ...
def graph_capture_enabled() -> bool: ...
def reinitialize(
    pool_allocator: bool = False,
    managed_memory: bool = False,
    initial_pool_size: int | str | None = None,
    maximum_pool_size: int | str | None = None,
    devices: int | list[int] | None = 0,
    logging: bool = False,
    log_file_name: str | PathLike[str] | None = None,
) -> None: ...
def register_reinitialize_hook(func: _F, *args: Any, **kwargs: Any) -> _F: ...
def unregister_reinitialize_hook(func: Callable[..., Any]) -> None: ...
def install_as_rmm(replace_installed: bool = False, rmm_version: str | None = None) -> None: ...
def uninstall_as_rmm() -> None: ...
def is_installed_as_rmm() -> bool: ...
