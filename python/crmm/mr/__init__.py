"""rmm.mr: memory resources and each device's current one (see crmm.pylibrmm.memory_resource)."""

from ..pylibrmm.memory_resource import *  # noqa: F401,F403
from ..pylibrmm.memory_resource import __all__  # noqa: F401
from ..pylibrmm.memory_resource import _flush_logs, _initialize  # noqa: F401  (RMM's private names, used by its users)
from ..pylibrmm.memory_resource import _removed_name, _removed_names_present
from . import experimental  # noqa: F401


# RMM's names that its newest release removed, while install_as_rmm reports an older one
# (crmm.pylibrmm.memory_resource._memory_resource._REMOVED_NAMES).
def __getattr__(name):
    return _removed_name(__name__, name)


def __dir__():
    return sorted(set(globals()) | set(_removed_names_present()))
