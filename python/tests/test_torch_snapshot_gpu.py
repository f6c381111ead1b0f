"""`crmm replay --torch-snapshot` against a device pool, opened by PyTorch's own memory viewer
(torch.cuda._memory_viz): trace_plot and segment_plot render it, and its text views (segsum,
trace) read it. The snapshot has every key torch's own snapshot of the same kind of run has,
but those listed in TORCH_ONLY. Needs a GPU and PyTorch; $CRMM_TEST_OUTPUT_DIR, when set,
keeps the rendered HTML pages (trace.html, segments.html)."""

import os
import pickle
import subprocess

import pytest

from conftest import framework
from test_replay_torch_snapshot import EVENTS, check_against_log, crmm_tool, write_log

GPU_CONFIG = """\
[resource.gpu]
plugin = cuda
[resource.p]
plugin = pool
upstream = gpu
initial_size = 1MiB
"""
# keys of torch's snapshot that crmm has nothing for (torch's private pools, compile and user
# annotations of its own trace)
TORCH_ONLY = {"segment_pool_id", "compile_context", "user_metadata", "forward_frames"}


def crmm_snapshot(tmp_path, config_text=GPU_CONFIG):
    config = tmp_path / "gpu.ini"
    config.write_text(config_text)
    out = tmp_path / "crmm.pickle"
    done = subprocess.run([crmm_tool(), "replay", write_log(tmp_path), "--config", str(config), "--resource", "p",
                           "--repeats", "1", "--torch-snapshot", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(out, "rb") as f:
        return pickle.load(f)


def torch_snapshot(torch):
    torch.cuda.memory._record_memory_history(max_entries=1000)
    try:
        x = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
        y = torch.empty(100, dtype=torch.uint8, device="cuda")
        del x
        snap = torch.cuda.memory._snapshot()
        del y
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    return snap


def keys_of(items):
    keys = set()
    for item in items:
        keys |= set(item)
    return keys


def test_torch_memory_viz_renders_a_crmm_snapshot(gpu, tmp_path):
    torch = framework("torch")
    from torch.cuda import _memory_viz

    snap = crmm_snapshot(tmp_path)
    segments, trace = check_against_log(snap)
    assert len(trace) > len(EVENTS)

    theirs = torch_snapshot(torch)
    their_segments = theirs["segments"]
    their_blocks = [b for s in their_segments for b in s["blocks"]]
    their_trace = [e for t in theirs["device_traces"] for e in t if e["action"] != "oom"]
    assert keys_of(their_segments) - TORCH_ONLY <= keys_of(segments)
    assert keys_of(their_blocks) - TORCH_ONLY <= keys_of(b for s in segments for b in s["blocks"])
    assert keys_of(their_trace) - TORCH_ONLY <= keys_of(e for e in trace if e["action"] != "oom")

    pages = {"trace.html": _memory_viz.trace_plot(snap), "segments.html": _memory_viz.segment_plot(snap)}
    out_dir = os.environ.get("CRMM_TEST_OUTPUT_DIR") or str(tmp_path)
    for name, html in pages.items():
        assert isinstance(html, str) and len(html) > 1000, name
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(html)
    if hasattr(_memory_viz, "segsum"):
        summary = _memory_viz.segsum(snap)
        assert "segment" in summary.lower()
    if hasattr(_memory_viz, "trace"):
        text = _memory_viz.trace(snap)
        assert "alloc" in text


def test_an_expandable_pool_shows_each_allocation_outside_its_upstream_as_a_segment(gpu, tmp_path):
    """The expandable pool maps its own pages, past the recorder: each allocation it makes so is
    a segment of its own, allocated and freed with it, so the trace stays consistent."""
    framework("torch")
    snap = crmm_snapshot(tmp_path, GPU_CONFIG.replace("initial_size = 1MiB", "expandable = true"))
    segments, trace = check_against_log(snap)
    assert segments
