"""Shared fixtures: GPU gating and running Python snippets in a fresh process.

GPU tests skip without a CUDA device, and fail instead when $CRMM_TEST_REQUIRE_GPU is set to a
number >= 1 (as the C suites do). A framework (CuPy, Numba, PyTorch) that is not installed skips
its tests, and fails them when a GPU is required.
"""

import importlib
import os
import subprocess
import sys
import textwrap

import pytest

import crmm._lib

# Files the tests write get mode 0644 whatever umask pytest was started with: crmm refuses a
# config that others may write.
os.umask(0o022)


def required_gpus():
    try:
        return int(os.environ.get("CRMM_TEST_REQUIRE_GPU", "0") or 0)
    except ValueError:
        return 1


@pytest.fixture
def gpu():
    """Skip (or fail when required) unless a CUDA device exists."""
    if crmm._lib.device_count() == 0:
        if required_gpus() > 0:
            pytest.fail("CRMM_TEST_REQUIRE_GPU is set but there is no usable CUDA device")
        pytest.skip("no CUDA device")


def framework(name):
    """Import a framework for a GPU test: skip without it, fail without it when a GPU is required."""
    if required_gpus() > 0:
        return importlib.import_module(name)
    return pytest.importorskip(name)


@pytest.fixture
def no_gpu():
    """Skip when a CUDA device exists (tests of the errors crmm gives without one)."""
    if crmm._lib.device_count() > 0:
        pytest.skip("a CUDA device is present")


def run_python(code, env=None, timeout=600):
    """Run `code` in a fresh interpreter with this process's environment (and `env` on top);
    returns the CompletedProcess (text output)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# A config whose default resource is a pool over host memory: runs with a GPU or without.
HOST_POOL_CONFIG = """
    [crmm]
    default = main
    [resource.h]
    plugin = host
    [resource.main]
    plugin = pool
    upstream = h
    initial_size = 1MiB
    """


# crmm's default resource written out: an expandable pool over cuda (under make check no config is
# installed, so crmm_init(NULL) would give the plain cuda resource)
EXPANDABLE_POOL_CONFIG = """
[crmm]
default = pool
[resource.gpu]
plugin = cuda
[resource.pool]
plugin = pool
upstream = gpu
expandable = true
"""


def host_config(tmp_path, text):
    """Write a config file into tmp_path and return its path."""
    path = tmp_path / "crmm.ini"
    path.write_text(textwrap.dedent(text))
    return str(path)
