"""RMM's ``rmm.pylibrmm.cuda_stream`` of releases up to 26.04: ``CudaStreamFlags`` and
``CudaStream`` (an owning stream: crmm's ``Stream()``). RMM deprecated the module in 26.04 and
removed it in 26.06; under ``import rmm`` it is there only when the release asked for
(``install_as_rmm(rmm_version=...)``, ``python3 -m crmm.as_rmm --rmm-version``) is older than
26.06, and importing it warns (DeprecationWarning) under 26.04, as RMM's does. New code uses
``rmm.pylibrmm.stream``'s ``Stream`` and ``CudaStreamFlags``."""

import os
import sys
import warnings

from .. import _rmm_alias
from ..pylibrmm.stream import CudaStreamFlags
from ..pylibrmm.stream import Stream as CudaStream

__all__ = ["CudaStream", "CudaStreamFlags"]


def _internal(filename):
    """Whether a frame of this file is the import machinery's or the alias's, not the importer's."""
    return (filename in (__file__, _rmm_alias.__file__) or filename.startswith("<frozen importlib")
            or os.path.basename(os.path.dirname(filename)) == "importlib")


def _bootstrap(filename):
    """Whether warnings.warn skips a frame of this file when it counts stacklevel."""
    return "importlib" in filename and "_bootstrap" in filename


def _on_import_again():
    """RMM's warning at import, when the release asked for deprecates the module, attributed to
    the line that imports it (also called by the alias when the module is imported again under
    its RMM name)."""
    if not _rmm_alias.cuda_stream_module_deprecated():
        return
    # stacklevel counts the frames from here to the importer's, less the import system's own
    # (<frozen importlib._bootstrap...>), which warnings.warn skips itself
    level, frame = 1, sys._getframe(0)
    while frame is not None and _internal(frame.f_code.co_filename):
        frame = frame.f_back
        if frame is not None and not _bootstrap(frame.f_code.co_filename):
            level += 1
    warnings.warn(
        "rmm.pylibrmm.cuda_stream is deprecated; use rmm.pylibrmm.stream.CudaStreamFlags for stream flags, "
        "and rmm.pylibrmm.stream.Stream for stream objects.",
        DeprecationWarning,
        stacklevel=level,
    )


_on_import_again()
