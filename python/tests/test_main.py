"""`python -m crmm`: where it finds the crmm tool, and its errors (python/crmm/__main__.py), and
setup.py's search for the installed libcrmm that pip records in _paths.py."""

import importlib.util
import os
import pathlib
import sys

import pytest

from conftest import run_python

SETUP_PY = pathlib.Path(__file__).resolve().parent.parent / "setup.py"


def test_a_missing_tool_is_a_clear_error():
    done = run_python("import runpy; runpy.run_module('crmm', run_name='__main__')",
                      env={"CRMM_TOOL": "/nonexistent/crmm"})
    assert done.returncode == 2
    assert "no crmm tool found (tried: /nonexistent/crmm); set CRMM_TOOL" in done.stderr
    assert done.stdout == ""


def test_a_tool_that_is_not_executable_is_not_run(tmp_path):
    tool = tmp_path / "crmm"
    tool.write_text("#!/bin/sh\necho ran\n")
    tool.chmod(0o644)
    done = run_python("import runpy; runpy.run_module('crmm', run_name='__main__')",
                      env={"CRMM_TOOL": str(tool)})
    assert done.returncode == 2 and "no crmm tool found" in done.stderr and "ran" not in done.stdout


def test_arguments_reach_the_tool(tmp_path):
    tool = tmp_path / "crmm"
    tool.write_text('#!/bin/sh\nprintf "%s|" "$@"\n')
    tool.chmod(0o755)
    done = run_python("import sys, runpy; sys.argv = ['crmm', 'info', '--json', 'a b']; "
                      "runpy.run_module('crmm', run_name='__main__')", env={"CRMM_TOOL": str(tool)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "info|--json|a b|"


def test_build_tree_tool_is_found_beside_libs():
    import crmm.__main__ as main
    library = os.environ.get("CRMM_LIBRARY", "")
    if os.path.basename(os.path.dirname(os.path.realpath(library))) != ".libs":
        pytest.fail("make check sets CRMM_LIBRARY to the build tree's .libs/libcrmm.so")
    env_tool = os.environ.pop("CRMM_TOOL", None)
    try:
        tool = main.find_tool()
    finally:
        if env_tool is not None:
            os.environ["CRMM_TOOL"] = env_tool
    assert tool == os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(library))), "tools", "crmm")


def load_setup_py():
    spec = importlib.util.spec_from_file_location("crmm_setup_py", SETUP_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_setup_py_records_the_versioned_library(tmp_path, monkeypatch):
    (tmp_path / "libcrmm.so").touch()
    (tmp_path / "libcrmm.so.1").touch()
    (tmp_path / "libcrmm.so.1.0.0").touch()
    monkeypatch.setenv("CRMM_LIBDIR", str(tmp_path))
    assert load_setup_py().installed_libcrmm() == (str(tmp_path), "libcrmm.so.1")


def test_setup_py_records_nothing_without_a_library(tmp_path, monkeypatch):
    monkeypatch.setenv("CRMM_LIBDIR", str(tmp_path))
    assert load_setup_py().installed_libcrmm() is None


def test_setup_py_records_the_tool_directory(monkeypatch):
    monkeypatch.setenv("CRMM_BINDIR", "/opt/crmm/bin")
    assert load_setup_py().installed_bindir() == "/opt/crmm/bin"
