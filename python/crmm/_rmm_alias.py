"""`import rmm` resolved to crmm, on request only.

install_as_rmm() puts a finder at the front of sys.meta_path that answers "rmm" with the crmm
package and "rmm.X.Y" with crmm.X.Y (the same module objects: no copies, nothing renamed). It
refuses to hide a real RMM: when another package named rmm is installed or already imported,
it raises unless the caller says replace_installed=True.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading

from ._host import bool_arg

__all__ = ["install_as_rmm", "uninstall_as_rmm", "is_installed_as_rmm"]

_lock = threading.Lock()


class _AliasLoader(importlib.abc.Loader):
    """Loads "rmm.X" as the crmm.X module itself."""

    def __init__(self, target):
        self.target = target
        self.own_spec = None

    def create_module(self, spec):
        loaded_before = self.target in sys.modules
        module = importlib.import_module(self.target)
        self.own_spec = module.__spec__
        # a module that warns when imported (a deprecated one) warns at each import under its
        # RMM name too, not only at the crmm module's first
        hook = getattr(module, "_on_import_again", None)
        if loaded_before and hook is not None:
            hook()
        return module

    def exec_module(self, module):
        # The crmm module has run already; the import system set its __spec__ to the alias's,
        # which is put back so that crmm's modules still know their own name.
        module.__spec__ = self.own_spec


class _RmmFinder(importlib.abc.MetaPathFinder):
    """Finds "rmm" and "rmm.*" as the crmm modules of the same name."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "rmm" and not fullname.startswith("rmm."):
            return None
        legacy = _LEGACY_MODULES.get(fullname)
        if legacy is not None and _release_has_removed(legacy[1]):
            return None  # gone in the release asked for: not found, as with that RMM
        crmm_name = legacy[0] if legacy is not None else "crmm" + fullname[3:]
        try:
            target = importlib.util.find_spec(crmm_name)
        except ImportError:
            return None
        if target is None:
            return None
        package = target.submodule_search_locations is not None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(crmm_name), is_package=package)


_finder = None

# RMM 25.10 and older rounded every DeviceBuffer's request up to 16 bytes (their resource
# reference's alignment, applied to the size); 25.12 stopped (rapidsai/rmm issue 2116).
_ROUNDING_UNTIL = (25, 12)
# RMM 26.06 deprecated get_current_device_resource_type and get_per_device_resource_type;
# 26.08 removed them (rapidsai/rmm pull 2387).
_TYPE_GETTERS_DEPRECATED_FROM = (26, 6)
_TYPE_GETTERS_REMOVED_FROM = (26, 8)

# RMM 26.04 deprecated the module rmm.pylibrmm.cuda_stream (CudaStream, CudaStreamFlags); 26.06
# removed it.
_CUDA_STREAM_MODULE_DEPRECATED_FROM = (26, 4)
# modules that RMM removed: their RMM name, crmm's module for the releases that have them
# (crmm._legacy, off the path of the package that RMM's name lies in) and the release that
# removed them
_LEGACY_MODULES = {"rmm.pylibrmm.cuda_stream": ("crmm._legacy.cuda_stream", (26, 6))}

_release = None  # the (YY, MM) release whose behaviour install_as_rmm asked for; None: the newest


def _release_has_removed(removed_from):
    """Whether the release asked for (the newest when none was) is `removed_from` or later."""
    return _release is None or _release >= removed_from


def _forget_legacy_modules():
    """After the release changed: the legacy modules the release asked for no longer has leave
    sys.modules under their RMM names, and their parent packages' attributes, so that every way
    of importing them fails as with that RMM."""
    for name, (target, removed_from) in _LEGACY_MODULES.items():
        if not _release_has_removed(removed_from):
            continue
        module = sys.modules.get(target)
        if module is None:
            continue
        if sys.modules.get(name) is module:
            del sys.modules[name]
        parent_name, _, attr = name.rpartition(".")
        parent = sys.modules.get("crmm" + parent_name[3:])
        if parent is not None and getattr(parent, attr, None) is module:
            delattr(parent, attr)


def cuda_stream_module_deprecated():
    """Whether the RMM release asked for (the newest when none was) deprecates the module
    rmm.pylibrmm.cuda_stream."""
    return _release is None or _release >= _CUDA_STREAM_MODULE_DEPRECATED_FROM


def _parse_release(rmm_version):
    """(YY, MM) of `rmm_version` ("25.10", "26.06.00"; None: None). TypeError or ValueError for
    anything else."""
    if rmm_version is None:
        return None
    if not isinstance(rmm_version, str):
        raise TypeError(f"rmm_version must be a string such as '25.10', not {type(rmm_version).__name__}")
    parts = rmm_version.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ValueError(f"rmm_version {rmm_version!r} is not YY.MM (such as '25.10')")
    return (int(parts[0]), int(parts[1]))


def _rounding_of(release):
    """The bytes each DeviceBuffer's request is rounded up to in `release` ((YY, MM); None: the
    newest behaviour)."""
    return 16 if release is not None and release < _ROUNDING_UNTIL else 1


def type_getters_deprecated():
    """Whether the RMM release asked for (the newest when none was) deprecates
    get_current_device_resource_type and get_per_device_resource_type."""
    return _release is None or _release >= _TYPE_GETTERS_DEPRECATED_FROM


def type_getters_removed():
    """Whether the RMM release asked for (the newest when none was) no longer has
    get_current_device_resource_type and get_per_device_resource_type."""
    return _release is None or _release >= _TYPE_GETTERS_REMOVED_FROM


def _real_rmm():
    """Where a package named rmm that is not this alias would be imported from, or None."""
    loaded = sys.modules.get("rmm")
    if loaded is not None:
        return None if loaded is sys.modules.get("crmm") else getattr(loaded, "__file__", "an imported module")
    try:
        spec = importlib.util.find_spec("rmm")
    except (ImportError, ValueError):
        return None
    return (spec.origin or "an installed package") if spec is not None else None


def is_installed_as_rmm():
    """True while `import rmm` gives crmm."""
    return _finder is not None and _finder in sys.meta_path


def install_as_rmm(replace_installed=False, rmm_version=None):
    """Make `import rmm` (and `import rmm.mr`, `from rmm.pylibrmm.stream import Stream`, ...)
    give crmm's modules in this process. Does nothing when done already (but take the
    rmm_version given). Raises RuntimeError, naming where it is, when a real RMM is installed or
    imported, unless `replace_installed` (then crmm answers in its place for imports from now
    on; modules imported before keep the real one). `rmm_version` ("25.10") asks for that
    release's behaviour where RMM changed it: up to 25.10 each DeviceBuffer's request is
    rounded up to 16 bytes, so statistics and tracking adaptors count what RMM 25.10 counted;
    get_current_device_resource_type and get_per_device_resource_type exist only before 26.08
    (RMM removed them there) and warn only from 26.06 (RMM deprecated them there).
    TypeError or ValueError for a version that is not "YY.MM", TypeError for a
    `replace_installed` that is not True or False (a string such as "false" would hide a real
    RMM)."""
    global _finder, _release
    bool_arg(replace_installed, "replace_installed")
    release = _parse_release(rmm_version)
    from .pylibrmm import device_buffer

    with _lock:
        if is_installed_as_rmm():
            device_buffer._set_allocation_rounding(_rounding_of(release))
            _release = release
            _forget_legacy_modules()
            return
        real = _real_rmm()
        if real is not None and not replace_installed:
            raise RuntimeError(
                f"a real RMM is installed ({real}); crmm will not hide it. Call "
                "crmm.install_as_rmm(replace_installed=True) to use crmm in its place anyway"
            )
        for name in [n for n in sys.modules if n == "rmm" or n.startswith("rmm.")]:
            del sys.modules[name]
        _finder = _RmmFinder()
        sys.meta_path.insert(0, _finder)
        device_buffer._set_allocation_rounding(_rounding_of(release))
        _release = release
        _forget_legacy_modules()


def uninstall_as_rmm():
    """Undo install_as_rmm: `import rmm` finds what is installed again (nothing when not
    installed)."""
    global _finder, _release
    from .pylibrmm import device_buffer

    with _lock:
        device_buffer._set_allocation_rounding(1)
        _release = None
        _forget_legacy_modules()
        if _finder is None:
            return
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        _finder = None
        crmm_modules = {id(m) for n, m in sys.modules.items() if n == "crmm" or n.startswith("crmm.")}
        for name in [n for n in sys.modules if n == "rmm" or n.startswith("rmm.")]:
            if id(sys.modules[name]) in crmm_modules:
                del sys.modules[name]
