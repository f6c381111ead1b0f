from ..pylibrmm.memory_resource.experimental import *
