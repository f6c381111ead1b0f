"""RMM's ``rmm.pylibrmm.cuda_stream`` of releases up to 26.04: ``CudaStreamFlags`` and
``CudaStream`` (an owning stream: crmm's ``Stream()``). RMM deprecated the module in 26.04 and
removed it in 26.06; under ``import rmm`` it exists only when the release asked for
(``install_as_rmm(rmm_version=...)``, ``python3 -m crmm.as_rmm --rmm-version``) is older than
26.06, and importing it warns (DeprecationWarning) from 26.04 on, as RMM's does. New code uses
``crmm.pylibrmm.stream``'s ``Stream`` and ``CudaStreamFlags``."""

import warnings

from .._rmm_alias import cuda_stream_module_deprecated
from .stream import CudaStreamFlags
from .stream import Stream as CudaStream

__all__ = ["CudaStream", "CudaStreamFlags"]



def _on_import_again(stacklevel=4):
    """RMM's warning at import, when the release asked for deprecates this module (also called
    by the rmm alias when the module is imported again under its RMM name)."""
    if cuda_stream_module_deprecated():
        warnings.warn(
            "rmm.pylibrmm.cuda_stream is deprecated; use rmm.pylibrmm.stream.CudaStreamFlags for stream flags, "
            "and rmm.pylibrmm.stream.Stream for stream objects.",
            DeprecationWarning,
            stacklevel=stacklevel,
        )


_on_import_again(stacklevel=3)
