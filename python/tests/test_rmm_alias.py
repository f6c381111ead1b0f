"""`import rmm` on crmm, opt-in: install_as_rmm() and `python3 -m crmm.as_rmm`. The alias gives
crmm's own modules, and never hides a real RMM unless told to. Each case runs in a fresh
process (the alias changes the import system)."""

import os
import sys

import pytest

from conftest import run_python


def test_import_rmm_gives_crmm_s_modules():
    r = run_python(
        """
        import sys
        import crmm
        assert "rmm" not in sys.modules
        crmm.install_as_rmm()
        crmm.install_as_rmm()  # twice: nothing more
        import rmm, rmm.mr, rmm.statistics
        from rmm.pylibrmm.stream import Stream
        from rmm.pylibrmm.device_buffer import DeviceBuffer
        import crmm.pylibrmm.stream
        assert rmm is crmm and rmm.mr is crmm.mr and rmm.statistics is crmm.statistics
        assert Stream is crmm.pylibrmm.stream.Stream and DeviceBuffer is crmm.DeviceBuffer
        assert sys.modules["rmm.mr"] is crmm.mr
        assert crmm.__spec__.name == "crmm" and crmm.mr.__spec__.name == "crmm.mr"
        assert not hasattr(crmm.pylibrmm.stream, "__path__"), "a module stays a module"
        import rmm.mr.experimental
        from rmm.pylibrmm.memory_resource._memory_resource import _flush_logs
        assert rmm.mr.experimental is crmm.mr.experimental and _flush_logs is crmm.mr._flush_logs
        h = rmm.mr.HostMemoryResource()
        h.deallocate(h.allocate(8), 8)
        try:
            import rmm.no_such_module
        except ModuleNotFoundError as e:
            print("missing:", e.name)
        assert crmm.is_installed_as_rmm()
        crmm.uninstall_as_rmm()
        assert not crmm.is_installed_as_rmm() and "rmm" not in sys.modules
        try:
            import rmm
        except ModuleNotFoundError:
            print("gone")
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["missing:", "rmm.no_such_module", "gone"]


def fake_rmm(tmp_path):
    pkg = tmp_path / "site" / "rmm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("REAL = True\n")
    return str(tmp_path / "site")


def test_a_real_rmm_is_never_hidden_silently(tmp_path):
    site = fake_rmm(tmp_path)
    r = run_python(
        f"""
        import sys
        sys.path.insert(0, {site!r})
        import crmm
        try:
            crmm.install_as_rmm()
        except RuntimeError as e:
            assert {site!r} in str(e) and "replace_installed=True" in str(e), e
            print("refused")
        import rmm
        assert rmm.REAL
        try:
            crmm.install_as_rmm()
        except RuntimeError:
            print("refused imported")
        crmm.install_as_rmm(replace_installed=True)
        import rmm
        assert rmm is crmm
        print("replaced")
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["refused", "refused", "imported", "replaced"]


def test_as_rmm_runs_a_program_unchanged(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("import sys, rmm, rmm.mr\nprint(rmm.__name__, rmm.mr.__name__, sys.argv[1:])\n")
    r = run_python(f"import sys, crmm.as_rmm; sys.exit(crmm.as_rmm.main([{str(prog)!r}, 'a', 'b']))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "crmm crmm.mr ['a', 'b']"


SPAWNS = """
import multiprocessing, subprocess, sys
import rmm

def child_module(_):
    import rmm
    return rmm.__name__

if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        spawned = pool.map(child_module, [0])[0]
    sub = subprocess.run([sys.executable, "-c", "import rmm; print(rmm.__name__)"], capture_output=True,
                         text=True, timeout=120)
    print(rmm.__name__, spawned, sub.stdout.strip() or sub.stderr.strip()[-300:])
"""


def test_the_processes_an_as_rmm_program_starts_import_rmm_as_crmm(tmp_path):
    """multiprocessing's spawned workers (as CUDA programs and dask use) and Python subprocesses."""
    import subprocess

    prog = tmp_path / "spawns.py"
    prog.write_text(SPAWNS)
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['USERS_SITE_RAN'] = '1'\n")
    env = dict(__import__("os").environ)
    env["PYTHONPATH"] = f"{tmp_path}:" + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "crmm.as_rmm", str(prog)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "crmm crmm crmm"
    # a child that never imports rmm does not import crmm either
    check = "import sys; print('crmm' in sys.modules)"
    env["CRMM_AS_RMM"] = ":"
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.path.dirname(crmm_package()), "_as_rmm_site"), env["PYTHONPATH"]])
    r = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "False" and r.stderr == "", r.stderr
    check = "import os; print(os.environ.get('USERS_SITE_RAN'))"  # the user's own sitecustomize still runs
    r = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "1", r.stderr


def test_the_children_find_crmm_where_the_program_found_it(tmp_path):
    """crmm found only as the working directory's package (no $PYTHONPATH): the children find it
    there too, and say nothing."""
    import subprocess

    prog = tmp_path / "spawns.py"
    prog.write_text(SPAWNS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    package_parent = os.path.dirname(os.path.dirname(crmm_package()))
    r = subprocess.run([sys.executable, "-m", "crmm.as_rmm", str(prog)], env=env, cwd=package_parent,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "crmm crmm crmm" and "cannot install" not in r.stderr


def crmm_package():
    import crmm

    return crmm.__file__


def test_as_rmm_runs_a_module_and_says_how_to_use_it(tmp_path):
    (tmp_path / "usesrmm.py").write_text("import rmm\nprint('module', rmm.__name__)\n")
    import subprocess

    env = {"PYTHONPATH": f"{tmp_path}:" + __import__("os").environ.get("PYTHONPATH", "")}
    full = dict(__import__("os").environ, **env)
    r = subprocess.run([sys.executable, "-m", "crmm.as_rmm", "-m", "usesrmm"], env=full, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "module crmm"
    r = subprocess.run([sys.executable, "-m", "crmm.as_rmm"], env=full, capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr


def test_as_rmm_refuses_a_real_rmm(tmp_path):
    site = fake_rmm(tmp_path)
    prog = tmp_path / "prog.py"
    prog.write_text("import rmm\nprint(rmm.__name__)\n")
    r = run_python(f"import sys; sys.path.insert(0, {site!r}); import crmm.as_rmm; sys.exit(crmm.as_rmm.main([{str(prog)!r}]))")
    assert r.returncode == 1 and "crmm.as_rmm: a real RMM is installed" in r.stderr
    assert "for this runner: --replace-installed" in r.stderr
    r = run_python(f"import sys; sys.path.insert(0, {site!r}); import crmm.as_rmm; sys.exit(crmm.as_rmm.main(['--replace-installed', {str(prog)!r}]))")
    assert r.returncode == 0 and r.stdout.strip() == "crmm", r.stderr


def test_an_rmm_version_is_checked_before_anything_changes():
    r = run_python(
        """
        import crmm
        for bad, error in ((25.1, TypeError), ("25", ValueError), ("x.10", ValueError), ("", ValueError)):
            try:
                crmm.install_as_rmm(rmm_version=bad)
            except error as e:
                assert "rmm_version" in str(e), e
            else:
                raise AssertionError(f"{bad!r} was taken")
        assert not crmm.is_installed_as_rmm()
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    for args in (["--rmm-version"], ["--rmm-version", "soon", "prog.py"]):
        r = run_python(f"import sys, crmm.as_rmm; sys.exit(crmm.as_rmm.main({args!r}))")
        assert r.returncode in (1, 2) and ("usage:" in r.stderr or "YY.MM" in r.stderr), r.stderr



def test_as_rmm_leaves_a_site_packages_crmm_off_the_childrens_path(tmp_path):
    """crmm installed in site-packages: the children find it there already, and that directory
    on their $PYTHONPATH would come before the standard library (a backport installed there,
    typing or dataclasses, would shadow the standard module)."""
    prog = tmp_path / "prog.py"
    prog.write_text("import os\nprint(os.environ['PYTHONPATH'])\n")
    parent = os.path.dirname(os.path.dirname(crmm_package()))
    r = run_python(f"""
        import os, site, sys
        site.getsitepackages = lambda: [{parent!r}]
        os.environ.pop("PYTHONPATH", None)
        import crmm.as_rmm
        sys.exit(crmm.as_rmm.main([{str(prog)!r}]))
        """)
    assert r.returncode == 0, r.stderr
    entries = r.stdout.strip().split(os.pathsep)
    assert entries == [os.path.join(parent, "crmm", "_as_rmm_site")], entries


def test_replace_installed_must_be_a_bool(tmp_path):
    """replace_installed hides a real RMM: a string such as "false" (true as a truth value)
    replaced it; crmm's own switch takes True or False only, as enable_graph_capture does."""
    site = fake_rmm(tmp_path)
    r = run_python(
        f"""
        import sys
        sys.path.insert(0, {site!r})
        import crmm
        for bad in ("false", 1, None):
            try:
                crmm.install_as_rmm(replace_installed=bad)
            except TypeError as e:
                assert "replace_installed must be a bool" in str(e), e
            else:
                raise AssertionError(f"{{bad!r}} was taken")
        assert not crmm.is_installed_as_rmm()
        import rmm
        assert rmm.REAL
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize("release,expect", [
    ("25.12", "module, no warning"),
    ("26.04", "module, DeprecationWarning at each import"),
    ("26.06", "ModuleNotFoundError"),
    (None, "ModuleNotFoundError"),
])
def test_rmm_pylibrmm_cuda_stream_is_there_as_in_the_release_asked_for(release, expect):
    """RMM had rmm.pylibrmm.cuda_stream (CudaStream, CudaStreamFlags) up to 26.04, deprecated it
    in 26.04 (a DeprecationWarning at import, which RMM 26.04's tests import twice to see) and
    removed it in 26.06: code and tests written for a release find it as that release had it,
    by every way of importing it, and the warning names the importing line."""
    r = run_python(
        f"""
        import importlib, importlib.util, sys, warnings
        import crmm
        crmm.install_as_rmm(rmm_version={release!r})
        seen = []
        for attempt in range(2):
            sys.modules.pop("rmm.pylibrmm.cuda_stream", None)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                try:
                    m = importlib.import_module("rmm.pylibrmm.cuda_stream")
                except ModuleNotFoundError as e:
                    assert e.name == "rmm.pylibrmm.cuda_stream", e
                    assert importlib.util.find_spec("rmm.pylibrmm.cuda_stream") is None
                    try:
                        from rmm.pylibrmm import cuda_stream
                    except ImportError:
                        pass
                    else:
                        raise AssertionError("from rmm.pylibrmm import cuda_stream worked")
                    seen.append("ModuleNotFoundError")
                    continue
            import rmm.pylibrmm.stream as stream
            assert m.CudaStreamFlags is stream.CudaStreamFlags and m.CudaStreamFlags.NON_BLOCKING == 1
            assert m.CudaStream is stream.Stream
            deprecated = [x for x in w if issubclass(x.category, DeprecationWarning)]
            assert all("importlib" not in x.filename and "crmm" not in x.filename for x in deprecated), [x.filename for x in deprecated]
            seen.append("module, DeprecationWarning at each import" if deprecated else "module, no warning")
        assert seen[0] == seen[1], seen
        # a later switch to a release without it takes it away, whatever imported it before
        crmm.install_as_rmm(rmm_version="26.06")
        try:
            from rmm.pylibrmm import cuda_stream
        except ImportError:
            pass
        else:
            raise AssertionError("still there after the switch to 26.06")
        print(seen[0])
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == expect, r.stdout + r.stderr
