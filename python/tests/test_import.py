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
]


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name):
    importlib.import_module(name)


@pytest.mark.parametrize("name,framework", [("cupy", "cupy"), ("numba", "numba"), ("torch", "torch")])
def test_allocator_module_imports_or_names_its_framework(name, framework):
    try:
        importlib.import_module(framework)
    except ImportError:
        with pytest.raises(ImportError, match=framework):
            importlib.import_module(f"crmm.allocators.{name}")
    else:
        importlib.import_module(f"crmm.allocators.{name}")


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
