#!/bin/bash
# Every workload of bench/torch_workloads.py under every allocator, each run in a fresh process,
# the modes alternated (their order rotates from one round to the next), RUNS rounds (default 3);
# then the table. Run from a crmm build tree on a GPU machine with torch (and timm or torchvision):
#   bash bench/torch_workloads.sh            # writes $OUT (default ./torch_workloads.out)
# Environment: RUNS, WORKLOADS, STEPS (dyn_train, moe and vit: training steps, default 10, vit 8), MODES
# (default "native expandable crmm"; crmm_plan first records each workload under crmm and plans it
# with `crmm plan` into $OUT/plans, over PLAN_STEPS steps where set (a recording shorter than the
# runs, which the plan's loop serves on); the other modes of torch_workloads.py are diagnosis, see
# torch_workloads.py), OUT, PYTHON (a python3 with torch, default python3); RECORD=1 also records
# each workload's crmm allocation log into $OUT/logs (for crmm replay, the logging plugin over the
# default pool); JOBS=N runs each workload N times in each process (a process that runs its job
# again; results.jsonl then has each job's device peak in job_peak_MiB).
set -u
. "$(dirname "$0")/torch_env.sh"
out=${OUT:-$build/torch_workloads.out}; mkdir -p "$out"
runs=${RUNS:-3}
workloads=${WORKLOADS:-dyn_train serving vit moe}
modes=(${MODES:-native expandable crmm})
results=$out/results.jsonl; : > "$results"
start=$SECONDS
# crmm_plan: each workload recorded once under crmm in a process of its own, and planned
if [[ " ${modes[*]} " == *" crmm_plan "* ]]; then
  mkdir -p "$out/plans"
  for w in $workloads; do
    steps=""; case $w in dyn_train|moe|vit) steps=${PLAN_STEPS:-${STEPS:-}}; steps=${steps:+--steps $steps} ;; esac
    $PY "$here/torch_workloads.py" --workload "$w" --mode crmm --record "$out/plans/$w.csv" $steps > /dev/null &&
      "$build/tools/crmm" plan "$out/plans/$w.csv" --output "$out/plans/$w.plan" &&
      gzip -f -9 "$out/plans/$w.csv" || echo "$w: recording or planning FAILED"
  done
fi
for ((r = 0; r < runs; r++)); do
  for w in $workloads; do
    steps=""; case $w in dyn_train|moe|vit) steps=${STEPS:+--steps $STEPS} ;; esac
    for ((i = 0; i < ${#modes[@]}; i++)); do
      m=${modes[$(((i + r) % ${#modes[@]}))]}
      plan=""; [ "$m" = crmm_plan ] && plan="--plan $out/plans/$w.plan"
      env -u PYTORCH_CUDA_ALLOC_CONF timeout 150 $PY "$here/torch_workloads.py" --workload "$w" --mode "$m" --run "$r" $steps $plan \
        --jobs "${JOBS:-1}" \
        >> "$results" 2> "$out/$w.$m.$r.err" || { echo "$w $m run $r FAILED:"; tail -3 "$out/$w.$m.$r.err"; }
    done
  done
  echo "round $((r + 1)) of $runs done at $((SECONDS - start)) s"
done
if [ "${RECORD:-0}" = 1 ]; then
  mkdir -p "$out/logs"
  for w in $workloads; do
    $PY "$here/torch_workloads.py" --workload "$w" --mode crmm --record "$out/logs/$w.csv" > /dev/null &&
      gzip -f -9 "$out/logs/$w.csv" && ls -l "$out/logs/$w.csv.gz"
  done
fi
$PY "$here/torch_workloads.py" --table "$results"
echo "all runs: $results ($((SECONDS - start)) s)"
