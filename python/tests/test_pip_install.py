"""`pip install ./python` in a fresh virtual environment, offline: the installed package loads
the libcrmm its build found (_paths.py) or the one $CRMM_LIBRARY names, ships its type
information, and `python -m crmm info` prints what `crmm info` prints.

Needs the build tree's libcrmm ($CRMM_LIBRARY, as `make check` sets it) and python3-venv; skips
without venv's ensurepip (CI installs it, and fails on the skip)."""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import crmm

PYTHON_SRC = pathlib.Path(__file__).resolve().parent.parent
TIMEOUT = 600


def build_libdir():
    library = os.environ.get("CRMM_LIBRARY", "")
    if os.sep not in library:
        pytest.fail("CRMM_LIBRARY must name the build tree's libcrmm.so (make check sets it)")
    return os.path.dirname(os.path.realpath(library))


def clean_env(**extra):
    """The environment for venv and pip: no sanitizer preload, no source tree on the path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "PYTHONPATH", "CRMM_LIBRARY", "CRMM_FASTALLOC", "PYTHONHOME")}
    env.update(PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1")
    env.update(extra)
    return env


def run(cmd, env, cwd):
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv (with the system's site-packages: numpy, setuptools) holding `pip install` of a copy of
    python/ (a copy: the build writes into the source, which `make distcheck` keeps read-only)."""
    if importlib.util.find_spec("ensurepip") is None:
        pytest.skip("python3-venv (ensurepip) is not installed")
    tmp = tmp_path_factory.mktemp("pip")
    src = tmp / "src"
    shutil.copytree(PYTHON_SRC, src, ignore=shutil.ignore_patterns(
        "tests", "__pycache__", "build", "*.egg-info", "_paths.py", "local.mk",
        ".libs", ".deps", ".dirstamp", "*.o", "*.lo", "*.la", "*.so"))
    bindir = tmp / "bin"  # the "installed" tool: a script that says it ran
    bindir.mkdir()
    (bindir / "crmm").write_text('#!/bin/sh\necho "installed crmm $*"\n')
    (bindir / "crmm").chmod(0o755)
    env = clean_env(CRMM_LIBDIR=build_libdir(), CRMM_BINDIR=str(bindir))
    run([sys.executable, "-m", "venv", "--system-site-packages", str(tmp / "venv")], env, tmp)
    python = str(tmp / "venv" / "bin" / "python")
    # --system-site-packages shows the base interpreter's packages; when this suite itself runs in
    # a venv (numpy and setuptools installed there), those are shown to the new venv too.
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    own = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
    pathlib.Path(purelib, "crmm_test_parent_site.pth").write_text("".join(p + "\n" for p in own))
    run([python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", str(src)], env, tmp)
    return python, tmp


def venv_env(**extra):
    """The environment a user of the venv has, with the sanitizer preload kept (a sanitized
    libcrmm loads only after it)."""
    env = clean_env(**extra)
    for key in ("LD_PRELOAD", "ASAN_OPTIONS"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def test_installed_package_loads_the_library_its_build_found(venv):
    python, tmp = venv
    out = run([python, "-c", "import crmm, importlib.metadata as m; "
               "print(crmm.__file__); print(crmm.library_path); print(crmm.__version__); print(m.version('crmm'))"],
              venv_env(), tmp).stdout.splitlines()
    assert out[0].startswith(str(tmp / "venv")), out
    assert os.path.dirname(out[1]) == build_libdir(), out
    assert os.path.basename(out[1]).startswith("libcrmm.so"), out
    assert out[2] == out[3] == crmm.__version__, "pyproject.toml's version is not libcrmm's"


def test_installed_package_ships_type_information(venv):
    python, tmp = venv
    installed = pathlib.Path(run([python, "-c", "import crmm, os; print(os.path.dirname(crmm.__file__))"],
                                 venv_env(), tmp).stdout.strip())
    assert (installed / "py.typed").is_file()
    stubs = {p.relative_to(PYTHON_SRC / "crmm") for p in (PYTHON_SRC / "crmm").rglob("*.pyi")}
    assert stubs <= {p.relative_to(installed) for p in installed.rglob("*.pyi")}
    # the source's modules, every one of them
    modules = {p.relative_to(PYTHON_SRC / "crmm") for p in (PYTHON_SRC / "crmm").rglob("*.py")}
    assert modules <= {p.relative_to(installed) for p in installed.rglob("*.py")}


def test_installed_package_allocates_through_its_extension(venv):
    """pip builds crmm._fastalloc (Python 3.10+ with a compiler and Python's headers, which this
    machine has where `make check` built the extension) and DeviceBuffer uses the installed one."""
    if os.environ.get("CRMM_FASTALLOC") == "off":
        pytest.skip("configure did not build crmm._fastalloc here (no Python 3.10+ headers)")
    python, tmp = venv
    code = "import crmm._alloc as a; print(a.ops.name); print(a.extension.__file__)"
    out = run([python, "-c", code], venv_env(), tmp).stdout.splitlines()
    assert out[0] == "extension", out
    assert out[1].startswith(str(tmp / "venv")), out


def test_crmm_library_overrides_the_installed_path(venv):
    python, tmp = venv
    library = os.path.realpath(os.environ["CRMM_LIBRARY"])
    out = run([python, "-c", "import crmm; print(crmm.library_path)"],
              venv_env(CRMM_LIBRARY=library), tmp).stdout.strip()
    assert out == library


def test_python_m_crmm_info_prints_what_crmm_info_prints(venv):
    python, tmp = venv
    tool = os.path.join(os.path.dirname(build_libdir()), "tools", "crmm")
    env = venv_env(CRMM_LIBRARY=os.environ["CRMM_LIBRARY"])
    expected = run([tool, "info"], env, tmp).stdout
    got = run([python, "-m", "crmm", "info"], env, tmp).stdout
    assert got == expected
    assert got.startswith("crmm ")


def test_python_m_crmm_runs_the_tool_installed_with_the_library(venv):
    """Loading the libcrmm that _paths.py names, `python -m crmm` runs the crmm of the BINDIR
    recorded with it ($CRMM_BINDIR at pip's build)."""
    python, tmp = venv
    done = run([python, "-m", "crmm", "info", "--json"], venv_env(), tmp)
    assert done.stdout == "installed crmm info --json\n"
