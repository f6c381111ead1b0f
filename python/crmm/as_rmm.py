"""Run a Python program that says `import rmm` on crmm, without editing it:

    python3 -m crmm.as_rmm program.py ARGS...
    python3 -m crmm.as_rmm -m module ARGS...        (e.g. -m pytest tests/)

It installs the alias (crmm.install_as_rmm) and runs the program as `python3` would. A real RMM
installed beside crmm is refused unless --replace-installed comes first.
"""

import os
import runpy
import sys

from ._rmm_alias import install_as_rmm

USAGE = "usage: python3 -m crmm.as_rmm [--replace-installed] (PROGRAM.py | -m MODULE) [ARGS...]"


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    replace = False
    if args[:1] == ["--replace-installed"]:
        replace, args = True, args[1:]
    if not args or args[0] in ("-h", "--help") or (args[0] == "-m" and len(args) < 2):
        print(USAGE, file=sys.stderr if not args or args[0] not in ("-h", "--help") else sys.stdout)
        return 0 if args and args[0] in ("-h", "--help") else 2
    try:
        install_as_rmm(replace_installed=replace)
    except RuntimeError as e:
        print(f"crmm.as_rmm: {e}", file=sys.stderr)
        return 1
    if args[0] == "-m":
        sys.argv = [args[1]] + args[2:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
