"""Where crmm.allocators.torch finds its hooks for PyTorch's CUDA graph pools
(crmm/_torch_graph_hooks.so, built only where PyTorch's C++ headers are found): $CRMM_TORCH_HOOKS
("off", or the library's path), else the one installed beside the package. A bad path is an error
before torch's allocator is touched; an installed library that cannot be loaded is left out with
a warning. Runs without torch and without a GPU; test_graphs_gpu.py
checks on a GPU that use_crmm() installs the hooks and that captures then take no user object."""

import warnings

import pytest

import crmm.allocators.torch as ct


def test_off_means_no_hooks(monkeypatch):
    monkeypatch.setenv("CRMM_TORCH_HOOKS", "off")
    assert ct._graph_hooks_library() is None
    assert ct._load_graph_hooks() is None


def test_a_path_given_is_taken(monkeypatch, tmp_path):
    lib = tmp_path / "hooks.so"
    lib.write_bytes(b"")
    monkeypatch.setenv("CRMM_TORCH_HOOKS", str(lib))
    assert ct._graph_hooks_library() == str(lib)


def test_a_path_that_does_not_exist_is_refused_naming_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("CRMM_TORCH_HOOKS", str(tmp_path / "missing.so"))
    with pytest.raises(FileNotFoundError, match=r"CRMM_TORCH_HOOKS=.*missing\.so does not exist"):
        ct._graph_hooks_library()


def test_without_the_variable_only_an_installed_library_is_taken(monkeypatch):
    monkeypatch.delenv("CRMM_TORCH_HOOKS", raising=False)
    import os

    installed = os.path.join(os.path.dirname(ct.__file__), "..", "_torch_graph_hooks.so")
    found = ct._graph_hooks_library()
    assert found is None if not os.path.isfile(installed) else os.path.samefile(found, installed)


def test_a_library_that_cannot_be_loaded_is_an_import_error_naming_the_way_out(monkeypatch, tmp_path):
    bad = tmp_path / "not_a_library.so"
    bad.write_bytes(b"not an ELF file")
    monkeypatch.setenv("CRMM_TORCH_HOOKS", str(bad))
    with pytest.raises(ImportError, match="CRMM_TORCH_HOOKS=off"):
        ct._load_graph_hooks()
    assert not ct.graph_hooks_installed()


def test_an_installed_library_that_cannot_be_loaded_is_left_out_with_a_warning(monkeypatch, tmp_path):
    bad = tmp_path / "_torch_graph_hooks.so"
    bad.write_bytes(b"not an ELF file")
    monkeypatch.delenv("CRMM_TORCH_HOOKS", raising=False)
    monkeypatch.setattr(ct, "_graph_hooks_library", lambda: str(bad))
    with pytest.warns(RuntimeWarning, match="cannot be loaded"):
        assert ct._load_graph_hooks() is None


class _Refusing:
    """A hooks library whose install refuses, as one built for another allocator would."""

    class crmm_torch_install_graph_hooks:
        restype = argtypes = None

        def __call__(self, *args):
            args[-2].value = b"not a pluggable allocator"
            return -1

    crmm_torch_install_graph_hooks = crmm_torch_install_graph_hooks()


def test_a_library_that_refuses_to_install_is_left_out_with_a_warning():
    with pytest.warns(RuntimeWarning, match="not installed: not a pluggable allocator"):
        ct._install_graph_hooks(_Refusing())
    assert not ct.graph_hooks_installed()


def test_a_library_without_the_entry_point_is_left_out_with_a_warning():
    with pytest.warns(RuntimeWarning, match="not installed"):
        ct._install_graph_hooks(object())
    assert not ct.graph_hooks_installed()


class _RecordStreamHooks:
    """A hooks library's record_stream entry point, scripted: it keeps what it is given, or refuses."""

    def __init__(self, refuse=None):
        self.given = None
        hooks = self

        class install:
            restype = argtypes = None

            def __call__(self, record_fn, last_error_fn, message, size):
                hooks.given = (record_fn, last_error_fn)
                if refuse:
                    message.value = refuse
                    return -1
                return 0

        self.crmm_torch_install_record_stream = install()


def test_record_stream_is_passed_libcrmms_functions(monkeypatch):
    import ctypes

    from crmm._lib import lib

    monkeypatch.setattr(ct, "_record_stream_installed", False)
    hooks = _RecordStreamHooks()
    ct._install_record_stream(hooks)
    assert ct.record_stream_installed()
    expected = tuple(ctypes.cast(getattr(lib, n), ctypes.c_void_p).value
                     for n in ("crmm_torch_record_stream", "crmm_last_error"))
    assert hooks.given == expected and None not in expected


def test_a_library_that_refuses_record_stream_is_left_out_with_a_warning(monkeypatch):
    monkeypatch.setattr(ct, "_record_stream_installed", False)
    with pytest.warns(RuntimeWarning, match="record_stream is not passed on to crmm: not a pluggable allocator"):
        ct._install_record_stream(_RecordStreamHooks(refuse=b"not a pluggable allocator"))
    assert not ct.record_stream_installed()


def test_a_library_without_record_stream_is_left_out_with_a_warning(monkeypatch):
    monkeypatch.setattr(ct, "_record_stream_installed", False)
    with pytest.warns(RuntimeWarning, match="record_stream is not passed on"):
        ct._install_record_stream(object())
    assert not ct.record_stream_installed()


class _AllocatorHooks:
    """A hooks library's allocator entry point, scripted: it keeps what it is given, or refuses."""

    _name = "/where/the/hooks/are.so"

    def __init__(self, refuse=None):
        self.given = None
        hooks = self

        class install:
            restype = argtypes = None

            def __call__(self, allocate_fn, deallocate_fn, last_error_fn, message, size):
                hooks.given = (allocate_fn, deallocate_fn, last_error_fn)
                if refuse:
                    message.value = refuse
                    return -1
                return 0

        self.crmm_torch_install_allocator = install()


class _Pluggable:
    """torch.cuda.memory.CUDAPluggableAllocator, as the allocator object's maker calls it."""

    def __init__(self, path, alloc_fn_name, free_fn_name):
        self.made_from = (path, alloc_fn_name, free_fn_name)


@pytest.fixture
def no_allocator_yet(monkeypatch):
    monkeypatch.setattr(ct, "CUDAPluggableAllocator", _Pluggable)
    monkeypatch.setattr(ct, "_allocator", None)
    monkeypatch.setattr(ct, "_null_allocator", None)


def test_the_allocator_raises_through_the_hooks_when_they_take_libcrmms_functions(no_allocator_yet):
    import ctypes

    from crmm._lib import lib

    hooks = _AllocatorHooks()
    allocator = ct._pluggable_allocator(hooks)
    assert allocator.made_from == (hooks._name, "crmm_torch_hooks_allocate", "crmm_torch_hooks_deallocate")
    expected = tuple(ctypes.cast(getattr(lib, n), ctypes.c_void_p).value
                     for n in ("crmm_torch_allocate_checked", "crmm_torch_deallocate", "crmm_last_error"))
    assert hooks.given == expected and None not in expected
    assert ct._pluggable_allocator(None) is allocator  # made once
    assert ct.rmm_torch_allocator is allocator and ct.crmm_torch_allocator is allocator


def test_without_hooks_the_allocator_is_libcrmms(no_allocator_yet):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        allocator = ct._pluggable_allocator(None)
    assert allocator.made_from == (ct.library_path, "crmm_torch_allocate", "crmm_torch_deallocate")
    assert ct._libcrmm_allocator() is allocator  # the one torch.cuda.MemPool gets (crmm_mem_pool)


def test_hooks_that_refuse_the_allocator_leave_libcrmms_with_a_warning(no_allocator_yet):
    with pytest.warns(RuntimeWarning, match="reach PyTorch as NULL, not as exceptions: no crmm functions"):
        allocator = ct._pluggable_allocator(_AllocatorHooks(refuse=b"no crmm functions"))
    assert allocator.made_from[1] == "crmm_torch_allocate"


def test_without_torch_the_allocator_object_is_none(monkeypatch):
    monkeypatch.setattr(ct, "CUDAPluggableAllocator", None)
    monkeypatch.setattr(ct, "_allocator", None)
    assert ct.rmm_torch_allocator is None and ct.crmm_torch_allocator is None
    with pytest.raises(AttributeError, match="no attribute 'rmm_torch_allocatr'"):
        ct.rmm_torch_allocatr
