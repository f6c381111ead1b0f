#!/bin/sh
# check_tools_scale.sh — the `crmm` program on generated configs of 100,000 resources: check-config
# on an upstream chain and on independent resources, `crmm info` on the chain (each resource's
# chain printed shortened, so the output stays linear), and `crmm replay` against resources of
# the chain. Nothing may crash. No GPU needed. Run by `make check` like check_tools.sh.

here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_support.sh"
need_crmm

start_checks scale

# generate chain|flat N FILE: r0 is host; each rK is statistics over r(K-1) (chain) or host (flat).
generate() {
    awk -v kind="$1" -v n="$2" 'BEGIN {
        print "[crmm]"; print "default = r" (n - 1)
        print "[resource.r0]"; print "plugin = host"
        for (i = 1; i < n; i++) {
            print "[resource.r" i "]"
            if (kind == "chain") { print "plugin = statistics"; print "upstream = r" (i - 1) }
            else print "plugin = host"
        }
    }' >"$3"
}

generate chain 1024 "$tmp/chain.ini"   # the deepest chain a config may describe
generate chain 100000 "$tmp/deep.ini"
generate flat 100000 "$tmp/flat.ini"

run 0 check-config "$tmp/chain.ini" && has_line "$tmp/chain.ini: OK (1024 resources, default 'r1023')"
run 0 check-config "$tmp/flat.ini" && has_line "$tmp/flat.ini: OK (100000 resources, default 'r99999')"
# deeper: refused at the first resource too deep (r0 takes lines 3-4 after [crmm], rK 3K+2..3K+4)
if run 1 check-config "$tmp/deep.ini"; then
    checks=$((checks + 1))
    grep -qF "deep.ini:3074: resource.r1024: its upstream chain is 1025 resources deep, more than the 1024 allowed" \
        "$tmp/out" || fail "check-config deep.ini does not name r1024's depth: $(head -c 300 "$tmp/out")"
fi

run 0 info --config "$tmp/chain.ini"
has_line "  r1023 = statistics -> r1022 -> r1021 -> r1020 -> r1019 -> r1018 -> r1017 -> r1016 -> r1015 -> ...   [host memory]" \
    "  r5 = statistics -> r4 -> r3 -> r2 -> r1 -> r0   [host memory]" \
    "  r0 = host   [host memory]"
checks=$((checks + 1))
if [ "$(wc -c <"$tmp/out")" -gt 20000000 ]; then
    fail "crmm info --config chain.ini printed more than 20 MB"
fi

printf 'Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000001,allocate,0x1000,100,0\n1,10:00:00.000002,free,0x1000,100,0\n' \
    >"$tmp/replay.csv"
# through all 1,024 layers (each adaptor calls its upstream: one stack frame per layer), and r0
for r in r1023 r0; do
    run 0 replay "$tmp/replay.csv" --config "$tmp/chain.ini" --resource "$r" --repeats 1 &&
        has_line "replay: $tmp/replay.csv: 2 events on 1 thread (1 allocation, 1 free, 0 allocate failures)"
done

echo "check_tools_scale: $checks checks, $failures failures"
[ "$failures" -eq 0 ]
