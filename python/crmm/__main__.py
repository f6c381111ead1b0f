"""`python -m crmm ARGS...` runs the crmm tool with ARGS (`python -m crmm info` prints what
`crmm info` prints), the tool that goes with the libcrmm this package loaded.

Where the tool is found, first match wins:
  1. $CRMM_TOOL, a path: only that is tried;
  2. when the loaded libcrmm is the one _paths.py names (written by `make install` or pip's
     build), crmm in its BINDIR;
  3. bin/crmm beside the loaded libcrmm's lib directory (an installed prefix);
  4. tools/crmm beside its .libs directory (a build tree, as `make check` runs the package);
  5. `crmm` on PATH.
"""

import os
import shutil
import sys

from . import _lib


def tool_candidates():
    """The paths tried for the crmm tool, in order (see the module's docstring)."""
    explicit = os.environ.get("CRMM_TOOL")
    if explicit:
        return [explicit]
    found = []
    try:
        from . import _paths
    except ImportError:
        _paths = None
    bindir = getattr(_paths, "BINDIR", "")
    if bindir and _lib.library_path == os.path.join(_paths.LIBDIR, _paths.LIBRARY):
        found.append(os.path.join(bindir, "crmm"))
    libdir = os.path.dirname(os.path.realpath(_lib.library_path)) if os.sep in _lib.library_path else ""
    if libdir:
        found.append(os.path.join(os.path.dirname(libdir), "bin", "crmm"))
        if os.path.basename(libdir) == ".libs":
            found.append(os.path.join(os.path.dirname(libdir), "tools", "crmm"))
    on_path = shutil.which("crmm")
    if on_path:
        found.append(on_path)
    return found


def find_tool():
    """The crmm tool's path; raises FileNotFoundError naming every place tried."""
    tried = tool_candidates()
    for path in tried:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    where = ", ".join(tried) if tried else "no candidate (libcrmm was loaded by name and crmm is not on PATH)"
    raise FileNotFoundError(f"no crmm tool found (tried: {where}); set CRMM_TOOL to its path")


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        tool = find_tool()
    except FileNotFoundError as e:
        print(f"python -m crmm: {e}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(tool, [tool] + args)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
