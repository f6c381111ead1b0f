"""`crmm replay LOG --torch-snapshot FILE.pickle` (tools/replay_torch_snapshot.c): the pickle
loads with Python's pickle and has the structure of torch.cuda.memory._snapshot(), checked
against the log: every logged allocation an alloc entry of its size, every free a
free_requested + free_completed, every logged failure an oom; segments tile with their blocks
and cover every block live at the end. Runs the build tree's crmm over host memory."""

import os
import pickle
import select
import shutil
import stat
import subprocess
import sys
import time

import pytest

LOG_HEADER = "Thread,Time,Action,Pointer,Size,Stream\n"
# (action, logged pointer, size, stream); sizes cross the pool's 1 MiB initial segment
EVENTS = [
    ("allocate", 0x1000, 100, 0),
    ("allocate", 0x2000, 5000, 7),
    ("free", 0x1000, 100, 0),
    ("allocate failure", 0x0, 99999, 0),
    ("allocate", 0x3000, 3000000, 0xffffffffffffffff),
    ("allocate", 0x4000, 700000, 0),
    ("free", 0x4000, 700000, 0),
    ("allocate", 0x5000, 256, 3),
]
CONFIG = """\
[resource.h]
plugin = host
[resource.p]
plugin = pool
upstream = h
initial_size = 1MiB
"""
SEGMENT_KEYS = {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
                "segment_type", "is_expandable", "frames", "blocks"}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}
TRACE_KEYS = {"action", "addr", "size", "stream", "time_us", "frames"}


def crmm_tool():
    library = os.environ.get("CRMM_LIBRARY", "")
    if os.sep not in library:
        pytest.fail("CRMM_LIBRARY must name the build tree's libcrmm.so (make check sets it)")
    return os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(library))), "tools", "crmm")


def write_log(tmp_path, events=EVENTS):
    lines = [f"1,10:00:00.{i:06d},{a},{hex(p) if p else '(nil)'},{s},{hex(st)}\n" for i, (a, p, s, st) in enumerate(events)]
    path = tmp_path / "log.csv"
    path.write_text(LOG_HEADER + "".join(lines))
    return str(path)


def replay(tmp_path, *args):
    config = tmp_path / "c.ini"
    config.write_text(CONFIG)
    return subprocess.run([crmm_tool(), "replay", write_log(tmp_path), "--config", str(config), "--repeats", "1",
                           *args], capture_output=True, text=True, timeout=120)


def snapshot_of(tmp_path, resource):
    out = tmp_path / "s.pickle"
    done = replay(tmp_path, "--resource", resource, "--torch-snapshot", str(out))
    assert done.returncode == 0, done.stderr
    with open(out, "rb") as f:
        return pickle.load(f), done.stderr


def check_against_log(snap):
    assert set(snap) == {"segments", "device_traces", "allocator_settings"}
    assert len(snap["device_traces"]) == 1
    trace = snap["device_traces"][0]
    for entry in trace:
        keys = TRACE_KEYS - {"addr"} | {"device_free"} if entry["action"] == "oom" else TRACE_KEYS
        assert set(entry) == keys, entry
        assert entry["frames"] == []
    # the calls, in the log's order, with the logged sizes and streams
    calls = [(e["action"], e["size"], e["stream"]) for e in trace if not e["action"].startswith("segment_")]
    expected = []
    for action, _, size, stream in EVENTS:
        if action == "allocate":
            expected.append(("alloc", size, stream))
        elif action == "free":
            expected += [("free_requested", size, stream), ("free_completed", size, stream)]
        else:
            expected.append(("oom", size, stream))
    assert calls == expected
    assert [e["time_us"] for e in trace] == sorted(e["time_us"] for e in trace)
    # a free names the address its allocation got
    live = {}
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            assert live.pop(e["addr"]) == e["size"]
    # the live blocks at the end are the log's leaks, and segments cover them, tiled by blocks
    segments = snap["segments"]
    blocks = {}
    for seg in segments:
        assert set(seg) == SEGMENT_KEYS
        at = seg["address"]
        for b in seg["blocks"]:
            assert set(b) == BLOCK_KEYS
            assert b["address"] == at and b["size"] > 0
            at += b["size"]
            if b["state"] == "active_allocated":
                blocks[b["address"]] = b["size"]
            else:
                assert b["state"] == "inactive"
        assert at == seg["address"] + seg["total_size"]
        assert seg["allocated_size"] == sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
    assert blocks == live
    # segments are what segment_alloc took and segment_free did not give back
    held = {}
    for e in trace:
        if e["action"] == "segment_alloc":
            held[e["addr"]] = e["size"]
        elif e["action"] == "segment_free":
            assert held.pop(e["addr"]) == e["size"]
    assert {s["address"]: s["total_size"] for s in segments} == held
    return segments, trace


def test_a_pool_shows_its_upstream_segments(tmp_path):
    snap, err = snapshot_of(tmp_path, "p")
    segments, trace = check_against_log(snap)
    assert "note:" not in err
    # the pool's 1 MiB at creation comes first; the 3 MB allocation made it grow
    assert trace[0]["action"] == "segment_alloc" and trace[0]["size"] == 1 << 20
    assert len(segments) >= 2 and any(s["total_size"] == 1 << 20 for s in segments)
    assert any(s["segment_type"] == "large" for s in segments)


def test_the_pool_is_built_again_from_the_configs_plugin_path(tmp_path):
    plugins = os.environ.get("CRMM_PLUGIN_PATH", "")
    if not plugins:
        pytest.fail("CRMM_PLUGIN_PATH must name the build tree's plugins (make check sets it)")
    config = tmp_path / "c.ini"
    config.write_text(f"[crmm]\nplugin_path = {plugins}\n" + CONFIG)
    out = tmp_path / "s.pickle"
    # the program itself (not libtool's wrapper), away from the build tree, with no plugin path but the config's
    built = os.path.join(os.path.dirname(crmm_tool()), ".libs", "crmm")
    program = tmp_path / "crmm"
    shutil.copy(built if os.path.exists(built) else crmm_tool(), program)
    env = {k: v for k, v in os.environ.items() if k != "CRMM_PLUGIN_PATH"}
    env["LD_LIBRARY_PATH"] = os.path.dirname(os.path.realpath(os.environ["CRMM_LIBRARY"]))
    done = subprocess.run([str(program), "replay", write_log(tmp_path), "--config", str(config), "--repeats", "1",
                           "--resource", "p", "--torch-snapshot", str(out)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "note:" not in done.stderr
    with open(out, "rb") as f:
        segments, trace = check_against_log(pickle.load(f))
    assert trace[0]["action"] == "segment_alloc" and trace[0]["size"] == 1 << 20


def test_a_parameter_with_a_space_and_a_comma_is_passed_again(tmp_path):
    (tmp_path / "my logs").mkdir()
    log_file = tmp_path / "my logs" / "a,b.csv"
    config = tmp_path / "c.ini"
    config.write_text(CONFIG + f"[resource.l]\nplugin = logging\nupstream = p\nfile = {log_file}\n")
    out = tmp_path / "s.pickle"
    done = subprocess.run([crmm_tool(), "replay", write_log(tmp_path), "--config", str(config), "--repeats", "1",
                           "--resource", "l", "--torch-snapshot", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "note:" not in done.stderr
    with open(out, "rb") as f:
        check_against_log(pickle.load(f))
    assert log_file.read_text().startswith("Thread,Time,Action,Pointer,Size,Stream")


def test_a_resource_without_upstream_shows_each_allocation_as_a_segment(tmp_path):
    snap, err = snapshot_of(tmp_path, "h")
    segments, trace = check_against_log(snap)
    assert "note: --torch-snapshot: what h reserves is not known (unsupported: h has no upstream): each allocation is its own segment" in err
    assert all(len(s["blocks"]) == 1 for s in segments)
    assert sorted(s["total_size"] for s in segments) == sorted([5000, 3000000, 256])


def test_integers_are_written_as_pythons_pickler_writes_them(tmp_path):
    """torch's memory viewer (MemoryViz.js) reads a LONG1 of more than 8 bytes as a JavaScript
    BigInt, and its address arithmetic then throws: every LONG1 must be as short as Python's own
    pickler makes it. Host addresses (above 2^31) and the stream 2^64 - 1 are both written."""
    import pickletools

    out = tmp_path / "s.pickle"
    done = replay(tmp_path, "--resource", "p", "--torch-snapshot", str(out))
    assert done.returncode == 0, done.stderr
    data = out.read_bytes()
    longs = [(arg, data[pos + 1]) for op, arg, pos in pickletools.genops(data) if op.name == "LONG1"]
    assert any(value >= 1 << 32 for value, _ in longs)  # addresses took the LONG1 path
    assert any(value == (1 << 64) - 1 for value, _ in longs)  # and the stream 2^64 - 1
    for value, length in longs:
        assert length == len(pickle.encode_long(value)), (value, length)


def test_an_unwritable_path_is_an_error_and_leaves_nothing(tmp_path):
    target = tmp_path / "missing" / "s.pickle"
    done = replay(tmp_path, "--resource", "p", "--torch-snapshot", str(target))
    assert done.returncode == 1
    assert f"--torch-snapshot: cannot write {target}: No such file or directory" in done.stderr
    assert done.stdout == ""


def test_a_directory_at_the_path_is_an_error_and_leaves_nothing(tmp_path):
    target = tmp_path / "dir"
    target.mkdir()
    done = replay(tmp_path, "--resource", "p", "--torch-snapshot", str(target))
    assert done.returncode == 1 and f"cannot write {target}" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.ini", "dir", "log.csv"]
    assert list(target.iterdir()) == []


def test_a_symlink_at_the_path_is_refused_and_its_target_kept(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "s.pickle"
    link.symlink_to(victim)
    done = replay(tmp_path, "--resource", "p", "--torch-snapshot", str(link))
    assert done.returncode == 1 and str(link) in done.stderr and "link" in done.stderr
    assert victim.read_text() == "keep"
    assert link.is_symlink()


def test_a_pipe_at_the_path_is_written_not_replaced(tmp_path):
    pipe = tmp_path / "s.pickle"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # a reader is there before the replay opens it
    config = tmp_path / "c.ini"
    config.write_text(CONFIG)
    done = subprocess.Popen([crmm_tool(), "replay", write_log(tmp_path), "--config", str(config), "--repeats", "1",
                             "--resource", "p", "--torch-snapshot", str(pipe)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    received = bytearray()
    try:
        while True:
            exited = done.poll() is not None
            select.select([reader], [], [], 0.1)
            try:
                chunk = os.read(reader, 1 << 16)
            except BlockingIOError:  # the writer has it open and wrote nothing yet
                continue
            if not chunk and not exited:  # no writer yet: select says readable at once
                time.sleep(0.01)
            received += chunk
            if not chunk and exited:
                break
    finally:
        os.close(reader)
    assert done.wait(timeout=120) == 0, done.stderr.read()
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    check_against_log(pickle.loads(bytes(received)))


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_a_file_of_another_user_is_refused_and_kept(tmp_path):
    out = tmp_path / "s.pickle"
    out.write_bytes(b"theirs")
    os.chown(out, 65534, 65534)
    done = replay(tmp_path, "--resource", "p", "--torch-snapshot", str(out))
    assert done.returncode == 1 and str(out) in done.stderr
    assert out.read_bytes() == b"theirs" and os.stat(out).st_uid == 65534


def test_a_failed_write_leaves_the_file_that_was_there(tmp_path):
    """Written beside and renamed over the path once complete: a write that fails (here the
    file-size limit) leaves the earlier snapshot whole and no file of its own behind."""
    out = tmp_path / "s.pickle"
    done = replay(tmp_path, "--resource", "p", "--torch-snapshot", str(out))
    assert done.returncode == 0, done.stderr
    before = out.read_bytes()
    config = tmp_path / "c.ini"
    limited = ("import resource, signal, subprocess, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
               "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64)); sys.exit(subprocess.run(sys.argv[1:], restore_signals=False).returncode)")
    program = os.path.join(os.path.dirname(crmm_tool()), ".libs", "crmm")  # not libtool's wrapper, which writes too
    if not os.path.exists(program):
        program = crmm_tool()
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(os.path.realpath(os.environ["CRMM_LIBRARY"])))
    done = subprocess.run([sys.executable, "-c", limited, program, "replay", write_log(tmp_path), "--config",
                           str(config), "--repeats", "1", "--resource", "p", "--torch-snapshot", str(out)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1 and f"cannot write {out}" in done.stderr, done.stderr
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.ini", "log.csv", "s.pickle"]


def test_an_existing_file_is_replaced(tmp_path):
    out = tmp_path / "s.pickle"
    out.write_bytes(b"old")
    done = replay(tmp_path, "--resource", "p", "--torch-snapshot", str(out))
    assert done.returncode == 0, done.stderr
    with open(out, "rb") as f:
        check_against_log(pickle.load(f))


def test_the_option_needs_a_value(tmp_path):
    done = replay(tmp_path, "--torch-snapshot")
    assert done.returncode == 2 and "--torch-snapshot needs a value" in done.stderr


def test_an_unknown_resource_writes_nothing(tmp_path):
    out = tmp_path / "s.pickle"
    done = replay(tmp_path, "--resource", "nosuch", "--torch-snapshot", str(out))
    assert done.returncode == 1 and "has no resource 'nosuch'" in done.stderr
    assert not out.exists()
