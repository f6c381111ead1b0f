"""Run by `site` at the start of each Python process started under `python3 -m crmm.as_rmm`
(this directory is first on $PYTHONPATH there): $CRMM_AS_RMM, set by crmm.as_rmm as
"[replace]:[YY.MM]", says how to install the rmm alias, as in the first process. crmm itself is
imported only when the process first imports rmm, so a child that never does starts as fast as
without it. Then the sitecustomize module this one shadows, if there is one further on the path,
runs as it would have."""
import importlib.machinery
import importlib.util
import os
import sys


class _RmmOnFirstImport:
    """A meta-path finder that installs the alias when `rmm` is first imported, then lets the
    alias's own finder answer."""

    def find_spec(self, name, path=None, target=None):
        if name != "rmm" and not name.startswith("rmm."):
            return None
        sys.meta_path.remove(self)
        spec = os.environ.get("CRMM_AS_RMM", "")
        replace, _, version = spec.partition(":")
        try:
            from crmm._rmm_alias import install_as_rmm

            install_as_rmm(replace_installed=replace == "replace", rmm_version=version or None)
        except Exception as e:  # `import rmm` then fails or finds the real one, as without crmm
            print(f"crmm.as_rmm: cannot install the rmm alias in this process: {e}", file=sys.stderr)
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            found = find(name, path, target) if find else None
            if found is not None:
                return found
        return None


def _run_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if "CRMM_AS_RMM" in os.environ:
    sys.meta_path.insert(0, _RmmOnFirstImport())
_run_shadowed_sitecustomize()
