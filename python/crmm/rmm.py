"""rmm.rmm: the module of RMM's package that defines RMMError, reinitialize, its hooks and
is_initialized (RMM's top level imports them from here); the same objects as crmm's."""

from . import mr  # noqa: F401  (RMM's rmm.rmm has it too)
from ._errors import RMMError
from ._reinitialize import register_reinitialize_hook, reinitialize, unregister_reinitialize_hook
from .pylibrmm.memory_resource import is_initialized

__all__ = [
    "RMMError",
    "is_initialized",
    "register_reinitialize_hook",
    "reinitialize",
    "unregister_reinitialize_hook",
]
