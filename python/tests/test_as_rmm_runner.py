"""`python3 -m crmm.as_rmm` refuses what it cannot run as `python3` would: one line naming the
program, module or option, and python3's exit status, not a traceback out of runpy blamed on
the runner."""

import subprocess
import sys


def run_as_rmm(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "crmm.as_rmm", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_a_missing_program_is_one_line_and_status_2(tmp_path):
    r = run_as_rmm(str(tmp_path / "nosuch.py"))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert "can't open file" in r.stderr and "nosuch.py" in r.stderr, r.stderr


def test_a_missing_module_is_one_line_and_status_1(tmp_path):
    r = run_as_rmm("-m", "no_such_module_for_crmm", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert "No module named no_such_module_for_crmm" in r.stderr, r.stderr
    (tmp_path / "pkg_without_main").mkdir()
    (tmp_path / "pkg_without_main" / "__init__.py").write_text("")
    r = run_as_rmm("-m", "pkg_without_main", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "pkg_without_main" in r.stderr and "cannot be directly executed" in r.stderr, r.stderr


def test_an_import_error_of_the_program_itself_is_its_own(tmp_path):
    """Only a module that is not there is the runner's message: an ImportError the module
    raises while it runs keeps its traceback, as under python3 -m."""
    (tmp_path / "breaks.py").write_text("import no_such_dependency_for_crmm\n")
    r = run_as_rmm("-m", "breaks", cwd=tmp_path)
    assert r.returncode == 1
    assert "Traceback" in r.stderr and "no_such_dependency_for_crmm" in r.stderr, r.stderr


def test_an_unknown_option_is_a_usage_error_not_a_file(tmp_path):
    for option in ("-c", "-x", "--replace"):
        r = run_as_rmm(option, "print(1)", cwd=tmp_path)
        assert r.returncode == 2, (option, r.stderr)
        assert "Traceback" not in r.stderr and "usage:" in r.stderr, (option, r.stderr)
        assert option in r.stderr, (option, r.stderr)


def test_rmm_version_takes_the_equals_form(tmp_path):
    (tmp_path / "prog.py").write_text("import rmm.pylibrmm.device_buffer as d\nprint(d._allocation_rounding)\n")
    r = run_as_rmm("--rmm-version=25.10", str(tmp_path / "prog.py"))
    assert r.returncode == 0 and r.stdout.strip() == "16", r.stderr
