"""rmm._version: the package's version and the commit it was installed from (RMM's module of
the two); the same strings as crmm.__version__ and crmm.__git_commit__."""

from . import __git_commit__, __version__

__all__ = ["__git_commit__", "__version__"]
