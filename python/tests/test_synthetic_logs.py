"""bench/synthetic_logs.py writes logs `crmm replay` reads as they are meant: every free pairs with
an allocation of its size on its stream, nothing is left live, the same seed gives the same log,
and the replay finds no anomaly in them. Runs the build tree's crmm over host memory."""

import csv
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "synthetic_logs.py")
PATTERNS = ["kv_growth", "random_lifetimes", "two_streams", "shape_drift"]


def generate(out, *args):
    done = subprocess.run([sys.executable, SCRIPT, "--out", str(out), *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    out = tmp_path_factory.mktemp("logs")
    generate(out, "--seed", "3")
    return out


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_free_pairs_with_a_live_allocation_of_its_size(logs, pattern):
    live = {}
    allocations = 0
    with open(logs / f"{pattern}.csv") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        key = (int(row["Pointer"], 16), row["Stream"])
        if row["Action"] == "allocate":
            assert key not in live
            live[key] = int(row["Size"])
            allocations += 1
        else:
            assert row["Action"] == "free"
            assert live.pop(key) == int(row["Size"])
    assert not live and allocations > 1000
    if pattern == "two_streams":
        assert {row["Stream"] for row in rows} == {"1", "2"}


def test_a_seed_gives_the_same_logs_and_another_seed_others(logs, tmp_path):
    generate(tmp_path / "same", "--seed", "3", "kv_growth")
    generate(tmp_path / "other", "--seed", "4", "kv_growth")
    mine = (logs / "kv_growth.csv").read_bytes()
    assert (tmp_path / "same" / "kv_growth.csv").read_bytes() == mine
    assert (tmp_path / "other" / "kv_growth.csv").read_bytes() != mine


def test_an_unknown_pattern_is_refused_naming_the_patterns(tmp_path):
    done = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path), "kv_grow"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "unknown pattern 'kv_grow'" in done.stderr and "random_lifetimes" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_replay_reads_a_log_without_anomaly(logs):
    library = os.environ.get("CRMM_LIBRARY", "")
    if os.sep not in library:
        pytest.fail("CRMM_LIBRARY must name the build tree's libcrmm.so (make check sets it)")
    tool = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(library))), "tools", "crmm")
    config = logs / "host.ini"
    config.write_text("[resource.h]\nplugin = host\n")
    done = subprocess.run([tool, "replay", str(logs / "two_streams.csv"), "--config", str(config), "--repeats", "1",
                           "--strict"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "log leaks: none" in done.stdout and "anomaly" not in done.stdout
    assert "allocations: 20000 replayed, 0 failed" in done.stdout
