"""Memory resources: rmm.pylibrmm.memory_resource over libcrmm's plugins, the config and the
per-device registry. The classes live in _memory_resource (crmm's own and RMM's classic ones),
_unowned (callbacks, foreign pools, system memory) and experimental, as RMM splits them."""

from . import _memory_resource
from ._memory_resource import *  # noqa: F401,F403
from ._memory_resource import __all__ as _classic
from ._unowned import *  # noqa: F401,F403
from ._unowned import __all__ as _unowned
from . import experimental

# crmm's helpers (params_string, current_device, QUERIES, ...) and RMM's private names
# (_flush_logs, _initialize) stay reachable here, as they were before the split.
globals().update({k: v for k, v in vars(_memory_resource).items() if not k.startswith("__") and k not in globals()})

__all__ = _classic + _unowned + ["experimental"]
del _classic, _unowned
