"""The build step pyproject.toml cannot declare: writing crmm/_paths.py, the installed
libcrmm the package loads first after $CRMM_LIBRARY (see crmm/_lib.py).

The directory is $CRMM_LIBDIR if set, else `pkg-config --variable=libdir crmm` (an installed
crmm.pc); the library is the versioned libcrmm.so.N found there, else libcrmm.so. When neither
names a directory holding libcrmm, no _paths.py is written and the package finds libcrmm through
the dynamic loader's path at import.
"""

import glob
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py


def installed_libcrmm():
    libdir = os.environ.get("CRMM_LIBDIR", "")
    if not libdir:
        try:
            out = subprocess.run(["pkg-config", "--variable=libdir", "crmm"], capture_output=True,
                                 text=True, timeout=60)
            libdir = out.stdout.strip() if out.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            libdir = ""
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
            f.write('"""Where libcrmm was installed when pip installed this package."""\n\n'
                    f"LIBDIR = {found[0]!r}\nLIBRARY = {found[1]!r}\n")


# setuptools runs this file as __main__; python/tests import it to test installed_libcrmm().
if __name__ == "__main__":
    setup(cmdclass={"build_py": BuildPyWithPaths})
