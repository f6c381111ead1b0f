"""PyTorch under crmm against PyTorch's own allocator, in real runs: GPT-2 small training
(15 steps, bf16 autocast, AdamW) and GPT-2 medium generation (64 new tokens with a KV cache).

Each run is its own process (PyTorch's allocator is chosen once per process); native and crmm
runs alternate. Peak device memory is what the device reports in use (cudaMemGetInfo, sampled
every 2 ms by a thread) above what it used before the workload's first allocation, so both
allocators are measured the same way, context and all.

    python3 bar.py --libcrmm BUILD/libcrmm/.libs/libcrmm.so --config conf/crmm.ini [--rounds 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(args):
    import torch
    if args.allocator == "crmm":
        os.environ["CRMM_CONFIG"] = args.config
        alloc = torch.cuda.memory.CUDAPluggableAllocator(args.libcrmm, "crmm_torch_allocate", "crmm_torch_deallocate")
        torch.cuda.memory.change_current_allocator(alloc)
    sys.path.insert(0, HERE)
    import workloads
    torch.cuda.init()
    free0, total = torch.cuda.mem_get_info()
    base, peak, stop = total - free0, [total - free0], threading.Event()

    def sample():
        while not stop.is_set():
            f, _ = torch.cuda.mem_get_info()
            peak[0] = max(peak[0], total - f)
            time.sleep(0.002)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    r = workloads.WORKLOADS[args.workload]()
    torch.cuda.synchronize()
    stop.set()
    t.join()
    f, _ = torch.cuda.mem_get_info()
    peak[0] = max(peak[0], total - f)
    r["peak_device_mib"] = round((peak[0] - base) / 2**20, 1)
    r["allocator"] = args.allocator
    r["workload"] = args.workload
    print("RESULT " + json.dumps(r))


def parent(args):
    rows = []
    for rnd in range(args.rounds):
        for wl in args.workloads:
            for allocator in (["native", "crmm"] if rnd % 2 == 0 else ["crmm", "native"]):
                cmd = [sys.executable, os.path.abspath(__file__), "--child", "--allocator", allocator,
                       "--workload", wl, "--libcrmm", args.libcrmm, "--config", args.config]
                out = subprocess.run(cmd, capture_output=True, text=True)
                line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
                if out.returncode != 0 or not line:
                    print("run failed: %s\n%s" % (" ".join(cmd), out.stderr[-3000:]), file=sys.stderr)
                    sys.exit(1)
                r = json.loads(line[0][7:])
                rows.append(r)
                print(json.dumps(r), flush=True)
    print("\nsummary (median over rounds; step time excludes the first step):")
    for wl in args.workloads:
        for allocator in ("native", "crmm"):
            rs = [r for r in rows if r["workload"] == wl and r["allocator"] == allocator]
            step = statistics.median(statistics.median(r["step_times"][1:]) for r in rs) * 1e3
            mem = statistics.median(r["peak_device_mib"] for r in rs)
            extra = ("loss %.4f" % rs[0]["loss"]) if "loss" in rs[0] else (
                "tokens/s %.0f checksum %d" % (statistics.median(r["tokens_per_s"] for r in rs), rs[0]["checksum"]))
            print("%-14s %-7s step %8.2f ms  peak device %8.1f MiB  %s" % (wl, allocator, step, mem, extra))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--allocator", default="native")
    ap.add_argument("--workload")
    ap.add_argument("--workloads", nargs="+", default=["gpt2_train", "gpt2_generate"])
    ap.add_argument("--libcrmm", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    child(args) if args.child else parent(args)


if __name__ == "__main__":
    main()
