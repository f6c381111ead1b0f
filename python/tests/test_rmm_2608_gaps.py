"""What RMM 26.08 changed in its Python API, and the older behaviour install_as_rmm(rmm_version=...)
keeps for programs written for an earlier release.

RMM 26.08 removed get_current_device_resource_type and get_per_device_resource_type (deprecated
in 26.06) from rmm.mr, rmm.pylibrmm.memory_resource and its _memory_resource module."""

import importlib
import os
import subprocess
import sys

import pytest

from conftest import HOST_POOL_CONFIG, host_config, run_python

import crmm
import crmm.mr as mr

MODULES = ["crmm.mr", "crmm.pylibrmm.memory_resource", "crmm.pylibrmm.memory_resource._memory_resource"]
GETTERS = ["get_current_device_resource_type", "get_per_device_resource_type"]


@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("name", GETTERS)
def test_the_type_getters_are_gone_as_in_rmm_26_08(module, name):
    """Without an older rmm_version crmm is the newest RMM: the names are missing from each
    module (AttributeError, ImportError for `from ... import`), its dir() and its __all__."""
    mod = importlib.import_module(module)
    assert not crmm.is_installed_as_rmm()
    with pytest.raises(AttributeError, match=name):
        getattr(mod, name)
    assert not hasattr(mod, name)
    with pytest.raises(ImportError, match=name):
        exec(f"from {module} import {name}", {})
    assert name not in dir(mod)
    assert name not in getattr(mod, "__all__", [])


def test_a_missing_attribute_of_the_modules_is_still_an_attribute_error():
    """The modules' __getattr__ answers only the removed names; any other is missing as usual."""
    with pytest.raises(AttributeError, match="no_such_name"):
        mr.no_such_name  # noqa: B018
    assert "get_current_device_resource" in dir(mr)


AS_RELEASE = """
import warnings
import crmm
crmm.install_as_rmm(rmm_version=RELEASE)
import rmm.mr, rmm.pylibrmm.memory_resource as prm, rmm.pylibrmm.memory_resource._memory_resource as prm_classic
found = []
for module in (rmm.mr, prm, prm_classic):
    for name, args in (("get_current_device_resource_type", ()), ("get_per_device_resource_type", (0,))):
        if not hasattr(module, name):
            assert name not in dir(module), name
            try:
                exec(f"from {module.__name__} import {name}", {})
            except ImportError:
                pass
            else:
                raise AssertionError(f"{module.__name__}.{name} imported")
            continue
        assert name in dir(module), name
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = getattr(module, name)(*args)
        assert got is rmm.mr.PoolMemoryResource, got
        assert getattr(module, name).__name__ == name
        assert all(w.filename == "<string>" for w in caught), caught  # the caller's line
        found.append((module.__name__, name, sorted({w.category.__name__ for w in caught})))
crmm.uninstall_as_rmm()
assert not hasattr(crmm.mr, "get_current_device_resource_type")  # back to the newest
print(sorted({(n, tuple(w)) for _, n, w in found}), len(found))
"""

BOTH = ["get_current_device_resource_type", "get_per_device_resource_type"]


@pytest.mark.parametrize(
    "release, expected",
    [
        ("25.10", f"{[(n, ()) for n in BOTH]} 6"),
        ("26.02", f"{[(n, ()) for n in BOTH]} 6"),
        ("26.06", f"{[(n, ('FutureWarning',)) for n in BOTH]} 6"),
        ("26.06.00", f"{[(n, ('FutureWarning',)) for n in BOTH]} 6"),
        ("26.08", "[] 0"),
        ("26.08.00", "[] 0"),
        ("26.10", "[] 0"),
    ],
)
def test_the_type_getters_exist_for_releases_before_26_08(tmp_path, release, expected):
    """A program written for RMM 26.06 or older still finds the getters in all three modules
    (warning from 26.06, as RMM deprecated them there); one for 26.08 or newer does not."""
    code = AS_RELEASE.replace("RELEASE", repr(release))
    done = run_python(code, env={"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)}, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == expected + "\n", done.stdout + done.stderr


def test_the_runner_s_rmm_version_keeps_the_type_getters(tmp_path):
    """`python3 -m crmm.as_rmm --rmm-version 26.06` runs a program that calls a getter."""
    program = tmp_path / "prog.py"
    program.write_text(
        "import warnings\nimport rmm.mr\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('ignore', FutureWarning)\n"
        "    print(rmm.mr.get_current_device_resource_type().__name__)\n"
    )
    env = {"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)}
    full_env = dict(os.environ, **env)
    runner = [sys.executable, "-m", "crmm.as_rmm"]
    old = subprocess.run(runner + ["--rmm-version", "26.06", str(program)],
                         env=full_env, capture_output=True, text=True, timeout=120)
    assert old.returncode == 0 and old.stdout == "PoolMemoryResource\n", old.stdout + old.stderr
    new = subprocess.run(runner + [str(program)], env=full_env, capture_output=True, text=True, timeout=120)
    assert new.returncode != 0 and "get_current_device_resource_type" in new.stderr, new.stdout + new.stderr
