"""Record the allocation log of one real PyTorch workload through crmm's logging plugin (RMM's
CSV format), so that `crmm replay` and replay_torch.py can replay it on any allocator.

    python3 record.py --libcrmm BUILD/libcrmm/.libs/libcrmm.so --workload gpt2_train --out gpt2_train.csv

$CRMM_PLUGIN_PATH must find the plugins (BUILD/plugins/built from a build tree)."""
import argparse
import json
import sys

import torch

import crmm_shim
import workloads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libcrmm", required=True)
    ap.add_argument("--workload", required=True, choices=sorted(workloads.WORKLOADS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=None)
    a = ap.parse_args()
    crmm_shim.use_crmm(a.libcrmm, crmm_shim.pool_config(log_file=a.out))
    kw = {"steps": a.steps} if a.steps else {}
    r = workloads.WORKLOADS[a.workload](**kw)
    torch.cuda.synchronize()
    json.dump({"workload": a.workload, "result": r}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
