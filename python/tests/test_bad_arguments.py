"""Public callables given arguments of the wrong kind raise a Python exception naming the
argument, rather than crashing the interpreter or keeping a wrong value (found by calling every
public callable with None, str, float, bool, negative, 2**64 and the like)."""

import pytest

import crmm
import crmm.ipc
from conftest import run_python


@pytest.mark.parametrize("mapping", ["True", "1", "4096", "2**64", "'text'", "b'a\\x00b'", "1.5", "object()"])
def test_an_imported_buffer_refuses_a_mapping_ipc_open_did_not_give(mapping):
    """ImportedBuffer(mapping) took any value as a crmm_ipc_mapping * and unmapped it on close()
    or at collection: ImportedBuffer(True) crashed the interpreter. Only None (a closed buffer)
    and what IpcHandle.open() made are accepted; the rest is a TypeError naming `mapping`."""
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
