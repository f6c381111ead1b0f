#!/bin/sh
# check_pool_plan_logs.sh — plans learned from the recorded PyTorch logs (bench/logs/*.csv.gz) by
# `crmm plan`, followed by an expandable pool over the scripted driver
# (tests/pool_expandable_replay --params plan=...): the log's run under its own plan is served
# wholly from the plan (no request misses), the pool then holds exactly the plan's extent rounded
# up to whole pages, and that is never more than the pool holds without the plan (on the logs it
# is less, but on gpt2_generate, where best fit already holds the live peak rounded up to a page).
# A plan worse than best fit, or a request served elsewhere, fails here.
#
# Then a recording shorter than the run: the plan learned from the first 60 % of the log's lines
# before its harness timing loop (its trailing 4 KiB requests; cut wherever that falls, mid-step
# included), followed by the whole log, with a device that runs
# 1 000 calls behind the host (--event-lag). Where the run goes on past the plan, the plan's loop
# serves it, or the plan lends its idle pages to the pool's growth without waiting for the device,
# so the pool never holds more than a page above what it holds without a plan. The same with the
# first 30 % (on some logs a step and a part), within 1 % and a page: the pool's own range moves
# its free pages while the plan's blocks live, and the plan's loop is over steps, not over the
# layers a cut ends in. Under the 60 % plan the log is also played a second time on the same pool,
# as a process that runs its job twice: within 1 % of the first time (the places the plan lent to
# the range take their memory back from it). In both, the most the pool counted is the most the device held (no page
# released while a lent page's old address still holds its memory). Then a server's log generated
# by bench/synthetic_logs.py (below). Counts only.
#
# Run by `make check` from the top build directory (CRMM_TEST_SRCDIR: the source's tests/).
srcdir=$(cd "${CRMM_TEST_SRCDIR:-$(dirname "$0")}/.." && pwd)
replay=$(pwd)/tests/pool_expandable_replay crmm=$(pwd)/tools/crmm
if [ ! -x "$replay" ] || [ ! -x "$crmm" ] || ! ls "$srcdir"/bench/logs/*.csv.gz >/dev/null 2>&1 ||
   ! command -v zcat >/dev/null; then
    echo "SKIP: needs tests/pool_expandable_replay, tools/crmm, bench/logs/*.csv.gz and zcat"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/crmm-plans-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
page=2097152 # the replay's page (an H200's granularity)
failures=0
for gz in "$srcdir"/bench/logs/*.csv.gz; do
    name=$(basename "$gz" .csv.gz)
    zcat "$gz" >"$tmp/log.csv" || { echo "FAIL: zcat $gz"; failures=$((failures + 1)); continue; }
    if ! "$crmm" plan "$tmp/log.csv" --output "$tmp/plan" 2>"$tmp/err"; then
        echo "FAIL: $name: crmm plan failed:"; cat "$tmp/err"
        failures=$((failures + 1))
        continue
    fi
    extent=$(sed -n 's/^extent //p' "$tmp/plan")
    "$replay" --repeats 0 --params "plan=$tmp/plan" "$tmp/log.csv" >"$tmp/planned" 2>&1 &&
        "$replay" --repeats 0 "$tmp/log.csv" >"$tmp/default" 2>&1 ||
        { echo "FAIL: $name: the replay failed:"; cat "$tmp/planned" "$tmp/default"; failures=$((failures + 1)); continue; }
    # pass 0's row: pass syncs growths maps unmaps creates peak_reserved_MiB peak_live_MiB ratio
    verdict=$(awk -v extent="$extent" -v page="$page" -v default_held="$(awk '$1 == "0" {print $7}' "$tmp/default")" '
        $1 == "0" { held = $7; rows++ }
        /plan so far/ { hits = $4; misses = $9 }
        END {
            pages = int((extent + page - 1) / page) * page / 1048576
            if (rows != 1) { printf "no pass reported"; exit }
            if (misses != 0) printf "%s requests not served from the plan; ", misses
            if (held != pages) printf "holds %s MiB, not the plan'"'"'s %s MiB; ", held, pages
            if (held > default_held) printf "holds %s MiB under the plan, more than %s without it; ", held, default_held
        }' "$tmp/planned")
    if [ -n "$verdict" ]; then
        echo "FAIL: $name: $verdict"; cat "$tmp/err" "$tmp/planned"
        failures=$((failures + 1))
    else
        echo "ok: $name: $(awk '$1 == "0" {print $7}' "$tmp/planned") MiB under its plan, $(awk '$1 == "0" {print $7}' "$tmp/default") without"
    fi
    body=$(awk -F, '$5 != 4096 { n = NR } END { print n }' "$tmp/log.csv")
    default_held=$(awk '$1 == "0" {print $7}' "$tmp/default")
    for pct in 60 30; do
        head -n "$((body * pct / 100))" "$tmp/log.csv" >"$tmp/prefix.csv"
        if ! "$crmm" plan "$tmp/prefix.csv" --output "$tmp/prefix.plan" 2>"$tmp/err" ||
           ! "$replay" --repeats "$((pct == 60))" --event-lag 1000 --params "plan=$tmp/prefix.plan" "$tmp/log.csv" >"$tmp/longer" 2>&1; then
            echo "FAIL: $name: planning or replaying its first $pct % failed:"; cat "$tmp/err" "$tmp/longer"
            failures=$((failures + 1))
            continue
        fi
        held=$(awk '$1 == "0" {print $7}' "$tmp/longer")
        device=$(awk '/device memory peak/ {print $6; exit}' "$tmp/longer")
        if [ "$held" != "$device" ]; then # memory released while a lent page's old address holds it
            echo "FAIL: $name: under the plan of its first $pct % the pool counted at most $held MiB, the device held $device"
            failures=$((failures + 1))
        fi
        # 60 %: at most a page above the pool without a plan; 30 %: and 1 % of it
        slack=$(awk -v pct="$pct" -v d="$default_held" -v page="$page" 'BEGIN { print page / 1048576 + (pct < 60 ? d / 100 : 0) }')
        if awk -v h="$held" -v d="$default_held" -v s="$slack" 'BEGIN { exit !(h != "" && h <= d + s) }'; then
            echo "ok: $name: $held MiB under the plan of its first $pct %, $default_held without"
        else
            echo "FAIL: $name: holds ${held:-?} MiB under the plan of its first $pct %, more than $slack MiB above $default_held without"
            cat "$tmp/err" "$tmp/longer"
            failures=$((failures + 1))
        fi
        # 60 %, the log played again on the same pool (a process that runs its job twice): the plan
        # finds the places it lent to the range in the first run, so within 1 % of the first pass
        again=$(awk '$1 == "1" {print $7}' "$tmp/longer")
        if [ "$pct" = 60 ] && ! awk -v a="$again" -v h="$held" 'BEGIN { exit !(a != "" && a <= h * 1.01) }'; then
            echo "FAIL: $name: run twice under the plan of its first 60 %, the second run held ${again:-?} MiB, the first $held"
            failures=$((failures + 1))
        fi
    done
done
# A server's log (bench/synthetic_logs.py kv_growth: caches grown by reallocation, requests of
# random lengths), whose start no plan can loop over: under the plan of its first 30 or 60 %, at
# most a page above the pool without a plan. Its first request's size recurs, so the ended plan
# starts over by chance; it must still lend its idle pages to the pool's growth.
if command -v python3 >/dev/null; then
    if python3 "$srcdir/bench/synthetic_logs.py" --seed 1 --out "$tmp" kv_growth >/dev/null &&
       "$replay" --repeats 0 --event-lag 1000 "$tmp/kv_growth.csv" >"$tmp/default" 2>&1; then
        default_held=$(awk '$1 == "0" {print $7}' "$tmp/default")
        lines=$(wc -l <"$tmp/kv_growth.csv")
        for pct in 30 60; do
            head -n "$((lines * pct / 100))" "$tmp/kv_growth.csv" >"$tmp/prefix.csv"
            if "$crmm" plan "$tmp/prefix.csv" --output "$tmp/prefix.plan" 2>"$tmp/err" &&
               "$replay" --repeats 0 --event-lag 1000 --params "plan=$tmp/prefix.plan" "$tmp/kv_growth.csv" >"$tmp/longer" 2>&1 &&
               held=$(awk '$1 == "0" {print $7}' "$tmp/longer") &&
               awk -v h="$held" -v d="$default_held" -v page="$page" 'BEGIN { exit !(h != "" && h <= d + page / 1048576) }'; then
                echo "ok: kv_growth: $held MiB under the plan of its first $pct %, $default_held without"
            else
                echo "FAIL: kv_growth: holds ${held:-?} MiB under the plan of its first $pct %, more than a page above $default_held without"
                cat "$tmp/err" "$tmp/longer"
                failures=$((failures + 1))
            fi
        done
    else
        echo "FAIL: kv_growth: generating or replaying the log failed:"; cat "$tmp/default"
        failures=$((failures + 1))
    fi
else
    echo "skip: kv_growth (no python3 to generate it)"
fi
[ "$failures" -eq 0 ]
