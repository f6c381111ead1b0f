"""rmm.mr: memory resources and each device's current one (see crmm.pylibrmm.memory_resource)."""

from ..pylibrmm.memory_resource import *  # noqa: F401,F403
from ..pylibrmm.memory_resource import __all__  # noqa: F401
from ..pylibrmm.memory_resource import _flush_logs, _initialize  # noqa: F401  (RMM's private names, used by its users)
from . import experimental  # noqa: F401
