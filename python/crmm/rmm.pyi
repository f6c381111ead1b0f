from . import mr as mr
from ._errors import RMMError as RMMError
from . import (
    is_initialized as is_initialized,
    register_reinitialize_hook as register_reinitialize_hook,
    reinitialize as reinitialize,
    unregister_reinitialize_hook as unregister_reinitialize_hook,
)
