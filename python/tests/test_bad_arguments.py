"""Public callables given arguments of the wrong kind raise a Python exception naming the
argument, rather than crashing the interpreter or keeping a wrong value (found by calling every
public callable with None, str, float, bool, negative, 2**64 and the like)."""

import os

import pytest

import crmm
import crmm.ipc
from conftest import run_python


@pytest.mark.parametrize("mapping", ["True", "1", "4096", "2**64", "'text'", "b'a\\x00b'", "1.5", "object()"])
def test_an_imported_buffer_refuses_a_mapping_ipc_open_did_not_give(mapping):
    """A value taken as a crmm_ipc_mapping * would be unmapped on close() or at collection (True
    would crash the interpreter): only None (a closed buffer) and what IpcHandle.open() makes are
    accepted; the rest is a TypeError naming `mapping`, in a process that goes on."""
    r = run_python(
        f"""
        import gc, crmm.ipc
        try:
            crmm.ipc.ImportedBuffer({mapping})
        except TypeError as e:
            print("refused:", e)
        gc.collect()
        print("alive")
        """
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "refused:" in r.stdout and "mapping" in r.stdout, r.stdout + r.stderr[-2000:]
    assert "alive" in r.stdout


def test_an_imported_buffer_of_none_is_still_a_closed_buffer():
    buf = crmm.ipc.ImportedBuffer(None)
    with pytest.raises(crmm.InvalidArgumentError, match="closed"):
        buf.ptr


BAD_OBJECTS = [None, "abc", 1.5, [1], object(), True, -1, 0, b"a\x00b"]


@pytest.mark.parametrize("bad", BAD_OBJECTS, ids=repr)
def test_ipc_functions_name_the_argument_that_is_not_what_they_take(bad):
    """export, export_pointer, open_handle and send given an argument of the wrong kind raise a
    TypeError naming it, not an AttributeError from inside."""
    with pytest.raises(TypeError, match=r"\bbuf\b"):
        crmm.ipc.export(bad)
    with pytest.raises(TypeError, match=r"\bmr\b"):
        crmm.ipc.export_pointer(bad, 0, 0)
    with pytest.raises(TypeError, match=r"\bhandle\b"):
        crmm.ipc.open_handle(bad)
    r, w = os.pipe()
    try:
        with pytest.raises(TypeError, match=r"\bhandle\b"):
            crmm.ipc.send(w, bad)
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("sock", [None, "abc", 1.5, [1], object(), b"a\x00b", True, False])
def test_ipc_send_and_recv_refuse_a_socket_that_is_not_one(sock):
    """A sock that is neither a socket nor a descriptor, or a bool (which would be descriptor 1 or
    0: stdout, stdin), is a TypeError naming sock."""
    with pytest.raises(TypeError, match=r"\bsock\b"):
        crmm.ipc.recv(sock)
    with pytest.raises(TypeError, match=r"\bsock\b"):
        crmm.ipc.send(sock, crmm.ipc.IpcHandle._adopt(None))


@pytest.mark.parametrize("what", [[1], {}, set(), bytearray(b"x")], ids=repr)
def test_query_names_what_for_an_unhashable_argument(what):
    """An unhashable query (a list) is a TypeError naming `what` and the queries there are."""
    host = crmm.mr.MemoryResource("host")
    with pytest.raises(TypeError, match=r"\bwhat\b"):
        host.query(what)


@pytest.mark.parametrize("size", ["1MiB\x00", "a\x00b", "\x00"], ids=repr)
def test_dask_config_text_refuses_a_nul_in_a_size(size):
    """A NUL in pool_size would go into the config text, which the config loader refuses later
    without naming the option: it is a ValueError naming it at once."""
    pytest.importorskip("distributed")  # crmm.dask is distributed's plugin; CI installs it
    import crmm.dask

    with pytest.raises(ValueError, match="pool_size"):
        crmm.dask.config_text(pool_size=size)
    with pytest.raises(ValueError, match="release_threshold"):
        crmm.dask.config_text(async_=True, release_threshold=size)


def test_use_crmm_refuses_an_inductor_cudagraph_trees_that_is_not_a_bool():
    """crmm's own switch: a string such as "false" (true as a truth value) left inductor's CUDA
    graph trees on, which fail later under crmm; it is a TypeError before anything changes, with
    or without PyTorch (here without: a process where `import torch` fails)."""
    r = run_python(
        """
        import sys
        sys.modules["torch"] = None
        import crmm.allocators.torch as t
        for bad in ("false", 0, None):
            try:
                t.use_crmm(inductor_cudagraph_trees=bad)
            except TypeError as e:
                assert "inductor_cudagraph_trees must be a bool" in str(e), e
            else:
                raise AssertionError(repr(bad))
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
