"""Exceptions raised by crmm: one class per crmm_status, carrying libcrmm's message.

Every fallible libcrmm call returns a status and leaves a message for the calling thread
(crmm_last_error). The classes also derive from the matching Python built-in, so that code
written for RMM (which raises MemoryError when memory runs out) catches them as before.
"""


class CrmmError(RuntimeError):
    """A libcrmm call failed; ``status`` is the crmm_status name, ``errcode`` its number (-1 for
    an unknown one), ``str()`` libcrmm's message.

    As rmm.RMMError it also takes RMM's arguments, ``RMMError(errcode, msg)`` (an int, then the
    message): ``errcode`` is then the number given and ``status`` "CRMM_ERROR_UNKNOWN"."""

    def __init__(self, message, status="CRMM_ERROR_UNKNOWN"):
        errcode = None
        if isinstance(message, int) and not isinstance(message, bool) and isinstance(status, str):
            errcode, message, status = message, status, "CRMM_ERROR_UNKNOWN"  # RMM's (errcode, msg)
        super().__init__(message)
        self.status = status
        self.errcode = errcode if errcode is not None else _STATUS_NUMBERS.get(status, -1)


class OutOfMemoryError(CrmmError, MemoryError):
    """The resource (or its upstream) has no memory for the request."""


class BadAllocError(CrmmError, MemoryError):
    """An allocation failed for a reason other than lack of memory."""


class InvalidArgumentError(CrmmError, ValueError):
    """An argument was refused (a host-only resource for a device buffer, a bad size, ...)."""


class CudaError(CrmmError):
    """A CUDA runtime call failed; the message names it (e.g. no CUDA device)."""


class ConfigError(CrmmError):
    """A config file or parameter string is wrong ("FILE:LINE: message")."""


class PluginError(CrmmError):
    """A plugin could not be found, loaded or validated."""


class NotFoundError(CrmmError, LookupError):
    """A named thing (resource, file) does not exist."""


class UnsupportedError(CrmmError):
    """The resource or device does not support the operation."""


class CrmmIOError(CrmmError, OSError):
    """Reading or writing a file failed."""


class StateError(CrmmError):
    """The call is not valid now (e.g. while the process exits)."""


# RMM's name for its error class, so that `except rmm.RMMError` keeps working.
RMMError = CrmmError

# crmm_status values (crmm/error.h) -> (name, class)
_BY_STATUS = {
    1: ("CRMM_ERROR_OUT_OF_MEMORY", OutOfMemoryError),
    2: ("CRMM_ERROR_BAD_ALLOC", BadAllocError),
    3: ("CRMM_ERROR_INVALID_ARGUMENT", InvalidArgumentError),
    4: ("CRMM_ERROR_CUDA", CudaError),
    5: ("CRMM_ERROR_CONFIG", ConfigError),
    6: ("CRMM_ERROR_PLUGIN", PluginError),
    7: ("CRMM_ERROR_NOT_FOUND", NotFoundError),
    8: ("CRMM_ERROR_UNSUPPORTED", UnsupportedError),
    9: ("CRMM_ERROR_IO", CrmmIOError),
    10: ("CRMM_ERROR_STATE", StateError),
}

_STATUS_NUMBERS = {name: number for number, (name, _cls) in _BY_STATUS.items()}


def error_for(status, message):
    """The exception for a failed call's status and message."""
    name, cls = _BY_STATUS.get(status, ("CRMM_ERROR_UNKNOWN", CrmmError))
    return cls(message or name, name)
