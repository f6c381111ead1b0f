"""bench/torch_workloads.py's table shows every mode it was given runs of, the diagnosis modes
included, each compared with native and expandable_segments from the same file; and --steps is
refused, before torch is imported, for a workload that takes no steps. Needs no GPU and no torch."""

import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "torch_workloads.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def result(mode, peak, metric, run_no=0):
    return {"workload": "vit", "mode": mode, "run": run_no, "peak_MiB": peak, "metric": metric,
            "metric_name": "step_ms", "first_step_s": 10.0, "alloc_free_ns": 3000.0, "reserved_peak_MiB": peak - 700,
            "allocated_peak_MiB": peak - 800, "outside_MiB": 100.0, "per_step": None}


def test_every_mode_in_the_file_gets_a_row(tmp_path):
    lines = [result("native", 6800, 28.0), result("expandable", 6300, 30.0), result("crmm", 6200, 29.0),
             result("crmm_split", 6400, 28.5), result("crmm_chunked", 7000, 28.2), result("crmm_split", 6600, 28.7, 1)]
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\nround 1 of 1 done\n")
    done = run("--table", str(path))
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[2].strip(): line for line in done.stdout.splitlines() if line.startswith("| vit |")}
    assert sorted(rows) == ["crmm", "crmm_chunked", "crmm_split", "expandable", "native"]
    split = [c.strip() for c in rows["crmm_split"].split("|")]
    assert split[3] == "2"  # both runs
    assert split[4] == "6500 (6400-6600)"  # the median peak, min and max
    assert split[5] == "%.3f" % (6500 / 6800) and split[6] == "%.3f" % (6500 / 6300)
    order = [line.split("|")[2].strip() for line in done.stdout.splitlines() if line.startswith("| vit |")]
    assert order[:3] == ["native", "expandable", "crmm"]  # the three modes first, as before


def test_steps_for_a_workload_without_steps_is_refused():
    done = run("--workload", "serving", "--mode", "native", "--steps", "5")
    assert done.returncode != 0
    assert "--steps is for dyn_train, moe, vit" in done.stderr


def test_fewer_than_one_job_is_refused():
    done = run("--workload", "vit", "--mode", "crmm", "--jobs", "0")
    assert done.returncode == 2
    assert "--jobs must be at least 1" in done.stderr
    assert "Traceback" not in done.stderr
