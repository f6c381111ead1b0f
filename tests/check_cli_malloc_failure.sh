#!/bin/sh
# check_cli_malloc_failure.sh — the crmm program with each of its mallocs failing in turn:
# `crmm info`, `info --json`, `check-config FILE` and `replay` of a small log, each run once per
# allocation it makes, with that allocation failing (tests/malloc_fail_shim.c, preloaded, counts
# the calls and the blocks held). Every such run must
#   - end without a crash (no signal),
#   - hold no more blocks at exit than the run where nothing failed (a leak on an error path
#     shows as more; what libc and the loaded plugins keep is in both),
#   - exit 0 only when its output is that of the run where nothing failed (numbers aside) or it
#     says what failed; a non-zero exit says why on its output,
#   - exit non-zero when the run where nothing failed does: a config that breaks a rule
#     (check-config of a bad one) is never passed because memory ran out on the way.
# CRMM_MALLOC_SWEEP_STEP=N runs every Nth allocation only: 4 by default (`make check`), 1 for all.
# A sanitizer build replaces malloc itself: this script then skips (exit 77).
here=$(cd "$(dirname "$0")" && pwd)
umask 022 # the config it writes must not be writable by others, whatever umask it was started with
if [ -n "$CRMM_TOOL" ]; then crmm=$CRMM_TOOL; elif [ -x ./tools/crmm ]; then crmm=./tools/crmm; else crmm=$here/../tools/crmm; fi
shim=${CRMM_MALLOC_SHIM:-./tests/.libs/libmallocfail.so}
[ -f "$shim" ] || shim=$here/.libs/libmallocfail.so
if [ ! -x "$crmm" ] || [ ! -f "$shim" ]; then
    echo "FAIL: no crmm program ($crmm) or no shim ($shim)"
    exit 1
fi
shim=$(cd "$(dirname "$shim")" && pwd)/$(basename "$shim")
# libtool's wrapper is a shell script: the program behind it runs ten times faster
real=$(dirname "$crmm")/.libs/crmm
libs=$(dirname "$crmm")/../.libs
if [ -x "$real" ] && [ -d "$libs" ]; then
    LD_LIBRARY_PATH=$(cd "$libs" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LD_LIBRARY_PATH
    crmm=$real
fi
if ldd "$crmm" 2>/dev/null | grep -q 'lib[at]san'; then
    echo "check_cli_malloc_failure: skipped: a sanitizer build replaces malloc itself"
    exit 77
fi
step=${CRMM_MALLOC_SWEEP_STEP:-4}
# The sweep is about the program's own allocations: no device is shown to it, so that a machine
# with a GPU runs the same (and as fast) as one without: a CUDA context per run would take seconds.
CUDA_VISIBLE_DEVICES=
export CUDA_VISIBLE_DEVICES

tmp=$(mktemp -d "${TMPDIR:-/tmp}/crmm-mallocfail-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
printf '[crmm]\ndefault = p\n[resource.h]\nplugin = host\n[resource.p]\nplugin = pool\nupstream = h\ninitial_size = 1MiB\nmaximum_size = 8MiB\n' \
    >"$tmp/ok.ini"
printf '[resource.h]\nplugin = host\n[resource.p]\nplugin = pool\nupstream = h\ninitial_size = 2MiB\nmaximum_size = 1MiB\n' \
    >"$tmp/bad.ini"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000001,allocate,0x1000,100,0\n' >"$tmp/log.csv"
printf '2,10:00:00.000002,allocate,0x2000,5000,0\n1,10:00:00.000003,free,0x1000,100,0\n' >>"$tmp/log.csv"
failures=0
runs=0

# one FAIL_AT ARGS...: run crmm with malloc number FAIL_AT failing (0: none); sets rc, calls,
# live, failed; output in $tmp/out
one() {
    at=$1
    shift
    rm -f "$tmp/report"
    CRMM_MALLOC_FAIL_AT=$at CRMM_MALLOC_REPORT=$tmp/report LD_PRELOAD=$shim "$crmm" "$@" >"$tmp/out" 2>&1
    rc=$?
    calls=0 live=0 failed=0
    if [ -s "$tmp/report" ]; then
        read -r _ calls _ live _ failed <"$tmp/report"
    fi
}

# sweep STATUS ARGS...: crmm ARGS exits STATUS when nothing fails; then each malloc fails in turn
sweep() {
    want=$1
    shift
    one 0 "$@"
    if [ "$rc" -ne "$want" ] || [ "$calls" -eq 0 ]; then
        failures=$((failures + 1))
        echo "FAIL: crmm $* exited $rc (not $want) or made no malloc ($calls) with nothing failing"
        sed 's/^/    | /' "$tmp/out" | head -10
        return
    fi
    n=$calls
    base_live=$live
    tr -d '0-9' <"$tmp/out" | sort >"$tmp/base"
    k=1
    while [ "$k" -le "$n" ]; do
        one "$k" "$@"
        runs=$((runs + 1))
        why=
        if [ "$rc" -ge 126 ] || [ ! -s "$tmp/report" ]; then
            why="crashed (exit $rc)"
        elif [ "$live" -gt "$base_live" ]; then
            why="holds $live blocks at exit, $base_live when nothing fails"
        elif [ "$rc" -ne 0 ] && [ ! -s "$tmp/out" ]; then
            why="exited $rc without a word"
        elif [ "$want" -ne 0 ] && [ "$rc" -eq 0 ]; then
            why="exited 0 where it exits $want when nothing fails"
        elif [ "$rc" -eq 0 ] && [ "$failed" -eq 1 ]; then
            tr -d '0-9' <"$tmp/out" | sort >"$tmp/now"
            if ! cmp -s "$tmp/base" "$tmp/now" &&
                ! comm -13 "$tmp/base" "$tmp/now" | grep -qiE 'memory|fail|error|cannot'; then
                why="exited 0 with other output than when nothing fails, and no word of a failure"
            fi
        fi
        if [ -n "$why" ]; then
            failures=$((failures + 1))
            echo "FAIL: crmm $* with malloc $k of $n failing: $why (CRMM_MALLOC_TRACE=1 shows where)"
            sed 's/^/    | /' "$tmp/out" | tail -5
        fi
        k=$((k + step))
    done
    echo "crmm $*: $n mallocs"
}

sweep 0 info --config "$tmp/ok.ini"
sweep 0 info --json --config "$tmp/ok.ini"
sweep 0 check-config "$tmp/ok.ini"
sweep 1 check-config "$tmp/bad.ini"
sweep 0 replay "$tmp/log.csv" --config "$tmp/ok.ini" --repeats 1

echo "check_cli_malloc_failure: $runs runs, $failures failures"
[ "$failures" -eq 0 ]
