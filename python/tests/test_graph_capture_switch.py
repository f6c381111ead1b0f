"""crmm.enable_graph_capture: the process-wide switch that lets crmm's pool ask CUDA whether a
stream is captured (docs/cuda-graphs.md); the CuPy and PyTorch integrations turn it on."""

import subprocess
import sys

import pytest

import crmm


def test_the_switch_turns_on_and_off():
    was = crmm.graph_capture_enabled()
    try:
        crmm.enable_graph_capture(False)
        assert crmm.graph_capture_enabled() is False
        crmm.enable_graph_capture()
        assert crmm.graph_capture_enabled() is True
    finally:
        crmm.enable_graph_capture(was)


@pytest.mark.parametrize("bad", [1, 0, None, "yes", 1.0])
def test_the_switch_takes_a_bool_only(bad):
    with pytest.raises(TypeError):
        crmm.enable_graph_capture(bad)


def test_a_fresh_process_starts_with_it_off_and_the_cupy_module_turns_it_on():
    code = ("import crmm; a = crmm.graph_capture_enabled(); import crmm.allocators.cupy; "
            "print(a, crmm.graph_capture_enabled())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]
