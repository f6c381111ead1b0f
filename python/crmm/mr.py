"""rmm.mr: memory resources and each device's current one (see crmm.pylibrmm.memory_resource)."""

from .pylibrmm.memory_resource import *  # noqa: F401,F403
from .pylibrmm.memory_resource import __all__  # noqa: F401
