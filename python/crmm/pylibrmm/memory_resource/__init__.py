"""Memory resources: rmm.pylibrmm.memory_resource over libcrmm's plugins, the config and the
per-device registry. The classes live in _memory_resource (crmm's own and RMM's classic ones),
_unowned (callbacks, foreign pools, system memory) and experimental, as RMM splits them."""

from . import _memory_resource
from ._memory_resource import *  # noqa: F401,F403
from ._memory_resource import __all__ as _classic
from ._memory_resource import (  # noqa: F401  (crmm's helpers and RMM's private names, used by the package and RMM's users)
    QUERIES,
    EmptyCounterStackError,
    _current_objects,
    _device_arg,
    _flush_logs,
    _initialize,
    _mr_arg,
    _orphaned_callbacks,
    _recorded_devices,
    _removed_name,
    _removed_names_present,
    _resource_now,
    check_pool_sizes,
    current_device,
    params_string,
)
from ._unowned import *  # noqa: F401,F403
from ._unowned import __all__ as _unowned
from . import experimental

# RMM's _memory_resource defines every resource class: it has these too (not in its __all__,
# which stays crmm's classic list).
for _name in _unowned:
    setattr(_memory_resource, _name, globals()[_name])
del _name

__all__ = _classic + _unowned + ["experimental"]
del _classic, _unowned


# RMM's names that its newest release removed, while install_as_rmm reports an older one
# (_memory_resource._REMOVED_NAMES).
def __getattr__(name):
    return _removed_name(__name__, name)


def __dir__():
    return sorted(set(globals()) | set(_removed_names_present()))
