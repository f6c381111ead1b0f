#!/bin/bash
# The PyTorch measurements of bench/RESULTS.md, run inside a crmm build tree on a GPU machine
# with torch, torchvision and transformers: records the allocation logs of the workloads in
# workloads.py, replays them on crmm's resources (crmm replay) and on PyTorch's caching allocator
# and cudaMallocAsync (replay_torch.py), then runs bar.py. Writes everything to $OUT (or ./out).
#   cd BUILD && bash SRC/bench/torch/run_h200.sh [record|replay|bar ...]
# Environment: LOGS (the logs to replay; default: those just recorded), RESOURCES (crmm resources
# of replay.ini to replay them on), PYREPLAY=0 (skip PyTorch's allocator and cudaMallocAsync),
# BAR_ROUNDS (rounds of bar.py), PYTHON (a python3 with torch, default python3).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/out}; mkdir -p "$out/logs"
build=$PWD
lib=$(find "$build" -name libcrmm.so -path "*/.libs/*" | head -n 1)
export CRMM_PLUGIN_PATH=$build/plugins/built
PY=${PYTHON:-python3}
$PY -c 'import torch.cuda' 2>/dev/null || { echo "$PY cannot import torch: set PYTHON to a python that can" >&2; exit 1; }
logs=${LOGS:-$out/logs}           # where replay reads the logs (bench/logs holds recorded ones)
resources=${RESOURCES:-pool_doubling pool_expandable async arena}
steps=${*:-record replay bar}
for step in $steps; do case $step in
record)
  for w in gpt2_train bert_train resnet_train gpt2_generate; do
    echo "== record $w"
    ( cd "$here" && $PY record.py --libcrmm "$lib" --workload "$w" --out "$out/logs/$w.csv" ) || echo "record $w FAILED"
    gzip -f -9 "$out/logs/$w.csv"; ls -l "$out/logs/$w.csv.gz"
  done ;;
replay)
  for log in "$logs"/*.csv.gz; do
    zcat "$log" > /tmp/replay.csv
    for r in $resources; do
      echo "== crmm replay $(basename "$log") $r"
      ./tools/crmm replay --config "$here/replay.ini" --resource $r /tmp/replay.csv 2>&1 | tail -12
    done
    [ "${PYREPLAY:-1}" = 1 ] || continue
    for a in torch async; do
      $PY "$here/replay_torch.py" --allocator $a --repeats 3 "$log"
    done
    CRMM_CONFIG=$here/replay.ini $PY "$here/replay_torch.py" --allocator crmm --libcrmm "$lib" --repeats 3 "$log"
  done ;;
bar)
  echo "== bar"
  $PY "$here/bar.py" --libcrmm "$lib" --config "$here/replay.ini" --rounds ${BAR_ROUNDS:-1} ;;
esac; done
