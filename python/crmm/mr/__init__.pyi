from ..pylibrmm.memory_resource import *
from ..pylibrmm.memory_resource import _flush_logs as _flush_logs, _initialize as _initialize
from . import experimental as experimental
