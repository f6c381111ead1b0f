"""Run by `site` at the start of each Python process started under `python3 -m crmm.as_rmm`
(this directory is first on $PYTHONPATH there): $CRMM_AS_RMM, set by crmm.as_rmm as
"[replace]:[YY.MM]", says how to install the rmm alias, as in the first process. Then the
sitecustomize module this one shadows, if there is one further on the path, runs as it would
have."""
import importlib.machinery
import importlib.util
import os
import sys


def _install_alias():
    spec = os.environ.get("CRMM_AS_RMM")
    if spec is None:
        return
    replace, _, version = spec.partition(":")
    try:
        from crmm._rmm_alias import install_as_rmm

        install_as_rmm(replace_installed=replace == "replace", rmm_version=version or None)
    except Exception as e:  # the program still runs; its `import rmm` says what is missing
        print(f"crmm.as_rmm: cannot install the rmm alias in this process: {e}", file=sys.stderr)


def _run_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_install_alias()
_run_shadowed_sitecustomize()
