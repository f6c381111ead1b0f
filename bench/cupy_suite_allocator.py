"""pytest plugin for bench/cupy_suite.sh: CuPy's own tests run with crmm as CuPy's allocator.

$CUPY_SUITE_ALLOCATOR picks the allocator: "crmm" (the default; crmm.allocators.cupy's
rmm_cupy_allocator over the current device's crmm resource) or "cupy" (CuPy's own memory pool,
to tell a failure crmm causes from one the machine has anyway). The allocator is set again before
each test, since some of CuPy's tests set their own and put CuPy's default back afterwards.
"""

import os

import pytest

_MODES = ("crmm", "cupy")


def _mode():
    mode = os.environ.get("CUPY_SUITE_ALLOCATOR", "crmm")
    if mode not in _MODES:
        raise pytest.UsageError(f"CUPY_SUITE_ALLOCATOR must be one of {', '.join(_MODES)}, not {mode!r}")
    return mode


def _set_allocator():
    import cupy

    if _mode() == "crmm":
        from crmm.allocators.cupy import rmm_cupy_allocator

        cupy.cuda.set_allocator(rmm_cupy_allocator)
    else:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)


def pytest_configure(config):
    _mode()


def pytest_report_header(config):
    return f"CuPy's allocator: {_mode()} (bench/cupy_suite_allocator.py)"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _set_allocator()
