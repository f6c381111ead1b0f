"""after_import(name, fn): run fn(module) once module `name` has been imported: now when it is
imported already, else right after its code has run, when something first imports it. So crmm
can adjust another package's settings without importing that package itself (importing
torch._inductor costs seconds that a program that never compiles should not pay)."""

import importlib.abc
import importlib.machinery
import sys
import threading

_lock = threading.Lock()
_waiting = {}  # module name -> [fn, ...]


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the functions waiting for it."""

    def __init__(self, loader, name):
        self.loader, self.name = loader, name

    def __getattr__(self, attr):
        # everything else (get_source, get_filename, is_package, ...) is the module's loader's
        return getattr(self.loader, attr)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        with _lock:
            fns = _waiting.pop(self.name, [])
        for fn in fns:
            fn(sys.modules.get(self.name, module))


class _Finder(importlib.abc.MetaPathFinder):
    """Finds a waited-for module through the other finders and wraps its loader."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _waiting:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


_finder = _Finder()


def after_import(name, fn):
    """Call fn(module) once `name` is imported (now, if it is). An exception from fn propagates
    to the import that triggered it."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _waiting.setdefault(name, []).append(fn)
            if _finder not in sys.meta_path:
                sys.meta_path.insert(0, _finder)
            return
    fn(module)
