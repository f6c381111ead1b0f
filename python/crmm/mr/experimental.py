"""rmm.mr.experimental: resources RMM marks experimental."""

from ..pylibrmm.memory_resource.experimental import *  # noqa: F401,F403
from ..pylibrmm.memory_resource.experimental import __all__  # noqa: F401
