"""Every module imports; the allocators name the framework they need; a missing libcrmm gives
a clear ImportError."""

import importlib

import pytest

from conftest import run_python

MODULES = [
    "crmm",
    "crmm.mr",
    "crmm.pylibrmm",
    "crmm.pylibrmm.stream",
    "crmm.pylibrmm.cuda_stream_pool",
    "crmm.pylibrmm.device_buffer",
    "crmm.pylibrmm.memory_resource",
    "crmm.pylibrmm.logger",
    "crmm.allocators",
    "crmm.allocators.cupy",
    "crmm.allocators.torch",
    "crmm.statistics",
]


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name):
    importlib.import_module(name)


def test_numba_allocator_imports_or_names_numba():
    try:
        importlib.import_module("numba")
    except ImportError:
        with pytest.raises(ImportError, match="numba"):
            importlib.import_module("crmm.allocators.numba")
    else:
        importlib.import_module("crmm.allocators.numba")


def test_cupy_and_torch_allocators_import_without_their_framework_and_fail_when_used():
    """As RMM's: a caller imports the module and skips when the framework is missing."""
    r = run_python(
        """
        import sys
        sys.modules["cupy"] = None  # as if not installed
        sys.modules["torch"] = None
        import crmm.allocators.cupy as c, crmm.allocators.torch as t
        assert t.rmm_torch_allocator is None and t.crmm_torch_allocator is None
        for call, name in ((lambda: c.rmm_cupy_allocator(8), "cupy"), (t.use_crmm, "torch")):
            try:
                call()
            except ModuleNotFoundError as e:
                assert e.name == name and name in str(e), e
            else:
                raise AssertionError(name)
        print("ok")
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_seed_names_are_reachable_from_the_top():
    import crmm as rmm

    assert rmm.DeviceBuffer is rmm.pylibrmm.device_buffer.DeviceBuffer
    assert rmm.pylibrmm.stream.Stream is rmm.pylibrmm.Stream
    assert rmm.pylibrmm.cuda_stream_pool.CudaStreamPool is rmm.pylibrmm.CudaStreamPool
    for fn in ("copy_device_to_ptr", "copy_host_to_ptr", "copy_ptr_to_host", "to_device"):
        assert callable(getattr(rmm.pylibrmm.device_buffer, fn))
    assert rmm.__version__


def test_missing_library_is_a_clear_import_error():
    r = run_python("import crmm", env={"CRMM_LIBRARY": "/nonexistent/libcrmm.so"})
    assert r.returncode != 0
    assert "ImportError: crmm cannot load libcrmm (/nonexistent/libcrmm.so" in r.stderr
    assert "CRMM_LIBRARY" in r.stderr


def test_after_import_runs_once_the_module_is_imported_and_never_imports_it(tmp_path):
    """crmm/_after_import.py, over a package made here: nothing is imported by asking; the
    function runs once, after the module's code, when something imports it; for a module
    imported already it runs at once; an exception from it reaches the import."""
    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "config.py").write_text("class triton:\n    cudagraph_trees = True\nRUNS = []\nRUNS.append(1)\n")
    (pkg / "bad.py").write_text("X = 1\n")
    r = run_python(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from crmm._after_import import after_import
        seen = []
        def off(m):
            seen.append(m.__name__)
            assert m.RUNS == [1], "ran before the module's code"
            m.triton.cudagraph_trees = False
        after_import("fakepkg.config", off)
        assert "fakepkg.config" not in sys.modules and seen == []
        import fakepkg.config as c
        assert seen == ["fakepkg.config"] and c.triton.cudagraph_trees is False
        import inspect
        assert "cudagraph_trees = True" in inspect.getsource(c), "the loader hides the module's source"
        assert c.__spec__.loader.get_filename("fakepkg.config").endswith("config.py")
        import importlib; importlib.reload(c)
        assert seen == ["fakepkg.config"], "ran again on a reload"
        after_import("fakepkg.config", lambda m: seen.append("now"))
        assert seen[-1] == "now"
        def boom(m):
            raise RuntimeError("boom")
        after_import("fakepkg.bad", boom)
        try:
            import fakepkg.bad
        except RuntimeError as e:
            print("raised", e)
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["raised", "boom"]


def test_every_error_class_is_exported():
    """The docs name crmm.StateError, crmm.CrmmIOError, ...: each error class is crmm's."""
    import inspect

    import crmm
    from crmm import _errors

    classes = {name for name, c in inspect.getmembers(_errors, inspect.isclass)
               if issubclass(c, crmm.CrmmError) and c.__module__ == _errors.__name__}
    assert classes and classes <= set(crmm.__all__)
    assert all(getattr(crmm, name) is getattr(_errors, name) for name in classes)


def test_a_library_that_is_not_libcrmm_is_a_clear_import_error():
    """$CRMM_LIBRARY naming a library that loads but is not libcrmm (or an older libcrmm without
    a function this package calls): an ImportError naming the library and the missing function,
    not an AttributeError out of ctypes."""
    import ctypes.util

    libc = ctypes.util.find_library("c")
    if not libc:
        pytest.skip("no C library known to the loader")
    r = run_python("import crmm", env={"CRMM_LIBRARY": libc})
    assert r.returncode != 0
    assert "AttributeError" not in r.stderr, r.stderr
    assert f"ImportError: crmm cannot load libcrmm ({libc}: " in r.stderr, r.stderr
    assert "crmm_version" in r.stderr and "CRMM_LIBRARY" in r.stderr, r.stderr
