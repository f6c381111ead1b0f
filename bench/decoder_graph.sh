#!/bin/bash
# bench/decoder_graph.py's modes over several models, each run in a fresh process, the modes
# alternated (their order rotates from one round to the next), ROUNDS rounds (default 2); then
# the table. Run from a crmm build tree on a GPU machine with torch:
#   bash bench/decoder_graph.sh            # writes $OUT (default ./decoder_graph.out)
# Environment: ROUNDS, MODELS (default "small wide gpt2vocab deep 7bslice"), MODES (default
# "native expandable crmm"), BATCHES (timed batches a process, default 10), OUT, PYTHON (a
# python3 with torch, default python3), SHIFTS ("SMALL,LARGE ...": round r passes the r-th pair,
# cycling, as --shift, so that the table's spread is that of placement; ROUNDS then defaults to
# the number of pairs).
set -u
. "$(dirname "$0")/torch_env.sh"
out=${OUT:-$build/decoder_graph.out}; mkdir -p "$out"
shifts=(${SHIFTS:-0,0})
rounds=${ROUNDS:-$([ -n "${SHIFTS:-}" ] && echo ${#shifts[@]} || echo 2)}
models=${MODELS:-small wide gpt2vocab deep 7bslice}
modes=(${MODES:-native expandable crmm})
results=$out/results.jsonl; : > "$results"
start=$SECONDS
for ((r = 0; r < rounds; r++)); do
  for model in $models; do
    for ((i = 0; i < ${#modes[@]}; i++)); do
      m=${modes[$(((i + r) % ${#modes[@]}))]}
      env -u PYTORCH_CUDA_ALLOC_CONF timeout 150 $PY "$here/decoder_graph.py" "$m" --model "$model" \
        --shift "${shifts[$((r % ${#shifts[@]}))]}" --batches "${BATCHES:-10}" >> "$results" 2> "$out/$model.$m.$r.err" ||
        { echo "$model $m round $r FAILED:"; tail -n 3 "$out/$model.$m.$r.err"; }
    done
  done
  echo "round $((r + 1)) of $rounds done at $((SECONDS - start)) s"
done
$PY "$here/decoder_graph.py" --table "$results"
echo "all runs: $results ($((SECONDS - start)) s)"
