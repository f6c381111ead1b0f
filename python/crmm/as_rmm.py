"""Run a Python program that says `import rmm` on crmm, without editing it:

    python3 -m crmm.as_rmm program.py ARGS...
    python3 -m crmm.as_rmm -m module ARGS...        (e.g. -m pytest tests/)
    python3 -m crmm.as_rmm --rmm-version 25.10 ...  (that RMM release's behaviour)

It installs the alias (crmm.install_as_rmm) and runs the program as `python3` would. A real RMM
installed beside crmm is refused unless --replace-installed comes first. --rmm-version YY.MM
asks for that RMM release's behaviour where RMM changed it (install_as_rmm's rmm_version).
The Python processes the program starts (multiprocessing's spawned workers, pytest-xdist's,
subprocesses) get the alias too: $CRMM_AS_RMM says how, and crmm/_as_rmm_site, first on their
$PYTHONPATH, installs it there.
"""

import importlib.util
import os
import runpy
import site
import sys

from ._rmm_alias import install_as_rmm

USAGE = "usage: python3 -m crmm.as_rmm [--replace-installed] [--rmm-version[=]YY.MM] (PROGRAM.py | -m MODULE) [ARGS...]"


def _is_site_dir(path):
    """Whether `path` is one of this interpreter's site-packages directories (the user's too)."""
    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user:
        dirs.append(user)
    return any(os.path.abspath(d) == path for d in dirs)


def _missing_module(name):
    """Why `python3 -m name` would not start (python3's words), or None when it would: the
    module, or a package's __main__, is not there. Only those: an ImportError the module raises
    as it runs is the program's own and keeps its traceback."""
    try:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:
            if importlib.util.find_spec(name + ".__main__") is None:
                return (f"No module named {name}.__main__; {name!r} is a package and cannot be directly "
                        "executed")
    except (ImportError, ValueError) as e:
        return f"Error while finding module specification for {name!r} ({type(e).__name__}: {e})"
    return f"No module named {name}" if spec is None else None


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    replace, version = False, None
    while args[:1] in (["--replace-installed"], ["--rmm-version"]) or args[:1] and args[0].startswith("--rmm-version="):
        if args[0] == "--replace-installed":
            replace, args = True, args[1:]
        elif args[0].startswith("--rmm-version="):
            version, args = args[0].partition("=")[2], args[1:]
        elif len(args) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        else:
            version, args = args[1], args[2:]
    if not args or args[0] in ("-h", "--help") or (args[0] == "-m" and len(args) < 2):
        print(USAGE, file=sys.stderr if not args or args[0] not in ("-h", "--help") else sys.stdout)
        return 0 if args and args[0] in ("-h", "--help") else 2
    if args[0].startswith("-") and args[0] != "-m":
        # not a program's path: python3's own options (-c, -) are not this runner's
        print(f"crmm.as_rmm: unknown option {args[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        install_as_rmm(replace_installed=replace, rmm_version=version)
    except (RuntimeError, TypeError, ValueError) as e:
        hint = "; for this runner: --replace-installed before the program" if isinstance(e, RuntimeError) else ""
        print(f"crmm.as_rmm: {e}{hint}", file=sys.stderr)
        return 1
    # the processes it starts: crmm/_as_rmm_site/sitecustomize.py installs the alias there
    os.environ["CRMM_AS_RMM"] = ("replace" if replace else "") + ":" + (version or "")
    package = os.path.dirname(os.path.abspath(__file__))  # and where crmm is, found there as here,
    # unless that is a site-packages directory, which the children search already: on
    # $PYTHONPATH it would come before the standard library there, and its packages shadow it
    parent = os.path.dirname(package)
    paths = (os.path.join(package, "_as_rmm_site"), None if _is_site_dir(parent) else parent,
             os.environ.get("PYTHONPATH"))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    if args[0] == "-m":
        missing = _missing_module(args[1])
        if missing:
            print(f"crmm.as_rmm: {missing}", file=sys.stderr)
            return 1
        sys.argv = [args[1]] + args[2:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        try:
            os.stat(args[0])
        except OSError as e:
            print(f"crmm.as_rmm: can't open file {os.path.abspath(args[0])!r}: [Errno {e.errno}] {e.strerror}",
                  file=sys.stderr)
            return 2
        sys.argv = args
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
