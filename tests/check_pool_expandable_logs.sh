#!/bin/sh
# check_pool_expandable_logs.sh — the expandable pool over the recorded PyTorch logs
# (bench/logs/*.csv.gz), through the scripted driver (tests/pool_expandable_replay), with
# page_moves = wait (the default) and never: the pool never holds more than 1.02 times the most
# that was live (bert_train: 1.09, the price of not synchronizing at every one of its steps, see
# docs/expandable-pool.md; gpt2_train without page moves: 1.12, one large request that finds no
# hole big enough; moe_train under the default: 1.006 in its first pass, which best fit reaches and
# fit = newest does not, and 1.008 in its warm ones, also with its small frees in three other
# orders, as processes make them, under which taking a small class's newest block holds more;
# dyn_train and serving, which do not repeat, by rules of their own below);
# no pass synchronizes the device (every log is replayed on one stream, whose
# own free pages move without waiting), and the warm repeats of the log (passes 1 and 2 on one
# pool, as `crmm replay --repeats` times them) do not unmap a page either. Counts only, no timing.
#
# Run by `make check` from the top build directory (CRMM_TEST_SRCDIR: the source's tests/).
srcdir=$(cd "${CRMM_TEST_SRCDIR:-$(dirname "$0")}/.." && pwd)
replay=$(pwd)/tests/pool_expandable_replay
if [ ! -x "$replay" ] || ! ls "$srcdir"/bench/logs/*.csv.gz >/dev/null 2>&1 || ! command -v zcat >/dev/null; then
    echo "SKIP: needs tests/pool_expandable_replay, bench/logs/*.csv.gz and zcat"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/crmm-logs-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0
# check NAME MOVES [REPLAY OPTIONS]: replay $tmp/log.csv under page_moves=MOVES and judge the passes
check() {
    name=$1 moves=$2; shift 2
    what="$name ($moves${1:+ $*})"
    if ! "$replay" --repeats 2 --params "page_moves=$moves" "$@" "$tmp/log.csv" >"$tmp/out" 2>&1; then
        echo "FAIL: $what: the replay failed:"; cat "$tmp/out"
        failures=$((failures + 1))
        return
    fi
    # the rows: pass syncs growths maps unmaps creates peak_reserved peak_live ratio peak_at_line
    limit=1.02
    [ "$name" = bert_train ] && limit=1.09
    [ "$moves/$name" = never/gpt2_train ] && limit=1.12
    warm=$limit repeats=1
    [ "$moves/$name" = wait/moe_train ] && limit=1.006 warm=1.008
    # dyn_train (shapes drawn anew every step) and serving (requests of random sizes) do not
    # repeat from one pass to the next: a warm pass may move pages (never synchronizing), and
    # serving's second warm pass holds 3.5 % more than its live peak (the creep that
    # docs/expandable-pool.md describes for runs that do not repeat); without moves both hold
    # about what PyTorch's expandable_segments held in their processes
    case $moves/$name in
        wait/dyn_train) limit=1.005 warm=1.02 repeats=0 ;;
        never/dyn_train) limit=1.07 warm=1.07 ;;
        wait/serving) limit=1.01 warm=1.04 repeats=0 ;;
        never/serving) limit=1.06 warm=1.06 ;;
    esac
    verdict=$(awk -v limit="$limit" -v warm="$warm" -v repeats="$repeats" '$1 ~ /^[0-9]+$/ {
            at_most = $1 > 0 ? warm : limit
            if ($9 > at_most) printf "pass %s holds %s times the peak of live bytes (at most %s); ", $1, $9, at_most
            if (repeats && $1 > 0 && ($2 > 0 || $5 > 0)) printf "warm pass %s synchronizes %s times and unmaps %s pages; ", $1, $2, $5
            if ($2 > 0) printf "pass %s synchronizes %s times, where one stream moves its own pages without waiting; ", $1, $2
            rows++
        } END { if (rows != 3) printf "%d passes reported, not 3", rows }' "$tmp/out")
    if [ -n "$verdict" ]; then
        echo "FAIL: $what: $verdict"; cat "$tmp/out"
        failures=$((failures + 1))
    else
        echo "ok: $what"
    fi
}
for gz in "$srcdir"/bench/logs/*.csv.gz; do
    name=$(basename "$gz" .csv.gz)
    zcat "$gz" >"$tmp/log.csv" || { echo "FAIL: zcat $gz"; failures=$((failures + 1)); continue; }
    check "$name" wait
    check "$name" never
    # a process frees a step's small tensors in an order of its own: moe_train holds the same
    # under three such orders (seeds under which taking the newest small block holds more), and
    # vit_train stays within its limit under the orders that hold the most of those measured
    if [ "$name" = moe_train ]; then
        for seed in 2 4 5; do check "$name" wait --shuffle-small-frees $seed; done
    fi
    if [ "$name" = vit_train ]; then
        for seed in 3 4; do check "$name" wait --shuffle-small-frees $seed; done
    fi
done
[ "$failures" -eq 0 ]
