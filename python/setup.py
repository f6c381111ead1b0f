"""The build steps pyproject.toml cannot declare: writing crmm/_paths.py, the installed
libcrmm the package loads first after $CRMM_LIBRARY (see crmm/_lib.py), and the optional C
extension crmm._fastalloc (DeviceBuffer's allocate and free; Python 3.10+ stable ABI). Where it
cannot be built (no compiler, no Python headers), the install goes on without it and the package
allocates through ctypes.

The directory is $CRMM_LIBDIR if set, else `pkg-config --variable=libdir crmm` (an installed
crmm.pc); the library is the versioned libcrmm.so.N found there, else libcrmm.so. When neither
names a directory holding libcrmm, no _paths.py is written and the package finds libcrmm through
the dynamic loader's path at import. The crmm tool's directory (for `python -m crmm`) is
$CRMM_BINDIR if set, else exec_prefix/bin of that crmm.pc.
"""

import glob
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py


def pkg_config_variable(name):
    try:
        out = subprocess.run(["pkg-config", f"--variable={name}", "crmm"], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def installed_bindir():
    bindir = os.environ.get("CRMM_BINDIR", "")
    if not bindir:
        exec_prefix = pkg_config_variable("exec_prefix")
        bindir = os.path.join(exec_prefix, "bin") if exec_prefix else ""
    return bindir


def installed_libcrmm():
    libdir = os.environ.get("CRMM_LIBDIR", "") or pkg_config_variable("libdir")
    if not libdir:
        return None
    versioned = sorted(glob.glob(os.path.join(libdir, "libcrmm.so.[0-9]*")), key=len)
    if versioned:
        return libdir, os.path.basename(versioned[0])
    if os.path.exists(os.path.join(libdir, "libcrmm.so")):
        return libdir, "libcrmm.so"
    return None


class BuildPyWithPaths(build_py):
    def run(self):
        super().run()
        found = installed_libcrmm()
        if found is None:
            return
        target = os.path.join(self.build_lib, "crmm", "_paths.py")
        with open(target, "w", encoding="utf-8") as f:
            f.write('"""Where libcrmm and the crmm tool were installed when pip installed this package."""\n\n'
                    f"LIBDIR = {found[0]!r}\nLIBRARY = {found[1]!r}\nBINDIR = {installed_bindir()!r}\n")


def extensions():
    """crmm._fastalloc where this Python has the stable ABI it is written for (3.10+)."""
    if sys.version_info < (3, 10):
        return {}
    return {
        "ext_modules": [Extension("crmm._fastalloc", ["crmm/_fastalloc.c"], py_limited_api=True, optional=True)],
        "options": {"bdist_wheel": {"py_limited_api": "cp310"}},
    }


# setuptools runs this file as __main__; python/tests import it to test installed_libcrmm().
if __name__ == "__main__":
    setup(cmdclass={"build_py": BuildPyWithPaths}, **extensions())
