#!/bin/sh
# check_tools.sh — the `crmm` program as a user runs it: check-config over every config of
# tests/configs/ (each bad one's first line is "; expect LINE: TEXT"), --help of every command,
# and `crmm info` (on a machine without a GPU it must say why). No GPU needed. Run by `make check`
# (script_support.sh finds the tool); the environment gives CRMM_PLUGIN_PATH and CRMM_TEST_SRCDIR.

here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_support.sh"
srcdir=${CRMM_TEST_SRCDIR:-$here}
configs=$srcdir/configs
if [ ! -x "$crmm" ] || [ ! -d "$configs" ]; then
    echo "FAIL: no crmm program ($crmm) or no configs ($configs)"
    exit 1
fi

start_checks tools

# ---- check-config over the table --------------------------------------------------------------
nbad=0
for f in "$configs"/bad-*.ini; do
    nbad=$((nbad + 1))
    first=$(head -n 1 "$f")
    line=$(printf '%s\n' "$first" | sed -n 's/^; expect \([0-9][0-9]*\): .*$/\1/p')
    text=$(printf '%s\n' "$first" | sed -n 's/^; expect [0-9][0-9]*: //p')
    if [ -z "$line" ] || [ -z "$text" ]; then
        fail "$f: the first line is not '; expect LINE: TEXT'"
        continue
    fi
    run 1 check-config "$f" && has "$f:$line: " "$text"
    lacks "config error: "
done
ngood=0
for f in "$configs"/good-*.ini; do
    ngood=$((ngood + 1))
    run 0 check-config "$f" && has "$f: OK"
done
if [ "$nbad" -lt 40 ] || [ "$ngood" -lt 5 ]; then
    fail "only $nbad bad and $ngood good configs in $configs"
fi
run 0 check-config "$configs/good-full.ini" && has "(5 resources, default 'top')"
run 0 check-config "$configs/good-empty.ini" && has "no default: devices use the built-in cuda plugin"

# files that are not configs
printf '[crmm]\ndefault = a\000\001\n' >"$tmp/binary.ini"
run 1 check-config "$tmp/binary.ini" && has "$tmp/binary.ini: not a text file"
run 1 check-config "$tmp/absent.ini" && has "cannot open config $tmp/absent.ini"
run 1 check-config "$tmp" && has "cannot read config $tmp"
# CRLF line endings: the same lines are reported
sed 's/$/\r/' "$configs/bad-cycle.ini" >"$tmp/crlf.ini"
run 1 check-config "$tmp/crlf.ini" && has "$tmp/crlf.ini:4: upstream cycle: a -> b -> a"
# usage errors
run 2 check-config
run 2 check-config a.ini b.ini && has "usage: crmm check-config FILE"
run 2 check-config --bogus && has "unknown option '--bogus'" "usage: crmm check-config FILE"

# ---- the program and --help of every command ---------------------------------------------------
run 0 --help && has "usage: crmm COMMAND" "check-config" "info"
commands=$(sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' "$tmp/out")
if [ -z "$commands" ]; then
    fail "crmm --help lists no commands"
fi
for c in $commands; do
    checks=$((checks + 1))
    "$crmm" "$c" --help >"$tmp/out" 2>&1
    status=$?
    if grep -q "not built yet" "$tmp/out"; then
        echo "note: crmm $c is a placeholder; its --help is not checked yet"
        continue
    fi
    if [ "$status" -ne 0 ] || ! head -n 1 "$tmp/out" | grep -q "^usage: crmm $c"; then
        fail "crmm $c --help exited $status or printed no 'usage: crmm $c' first"
    fi
    run 0 "$c" -h && has "usage: crmm $c"
done
run 0 help && has "usage: crmm COMMAND"
run 0 --version && has "crmm "
run 2 && has "usage: crmm COMMAND"
run 2 nosuchcommand && has "unknown command 'nosuchcommand'"

# ---- info ---------------------------------------------------------------------------------------
full=$configs/good-full.ini
if run 0 info --config "$full"; then
    has "crmm " "(plugin ABI 2." "plugin search path: " "plugins:" \
        "  host " "  template " "  paramtest " \
        "tag                    uint   default 0" \
        "id                     uint   default (required)" \
        "mode                   enum   default safe" "[fast|safe|debug]" \
        "config: $full" "default resource: top" "device 0 resource: params" "device 1 resource: gpu" \
        "  top = template(tag=7) -> mid -> heap   [host memory]" \
        "  params = paramtest(id=9, count=010, limit=1.5 GiB" \
        "  gpu = cuda"
    checks=$((checks + 1))
    if grep -q "^no CUDA device: ." "$tmp/out"; then
        :
    elif ! grep -q "^device 0: " "$tmp/out"; then
        fail "crmm info shows neither devices nor 'no CUDA device: REASON'"
    fi
    # the search path holds the directories of CRMM_PLUGIN_PATH
    old_ifs=$IFS
    IFS=:
    for d in $CRMM_PLUGIN_PATH; do
        IFS=$old_ifs
        has "$d"
    done
    IFS=$old_ifs
fi
run 1 info --config "$configs/bad-cycle.ini" && has "$configs/bad-cycle.ini:4: upstream cycle" "plugins:"
run 2 info --config && has "--config needs a FILE"
run 2 info --bogus && has "unexpected argument '--bogus'"
# an option's value after '=', in every command
run 1 info --config="$configs/bad-cycle.ini" && has "$configs/bad-cycle.ini:4: upstream cycle"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000001,allocate,0x1000,100,0\n' >"$tmp/one.csv"
printf '[resource.h]\nplugin = host\n' >"$tmp/host.ini"
run 0 replay "$tmp/one.csv" --config="$tmp/host.ini" --repeats=1 && has "allocations: 1 replayed"
run 2 replay "$tmp/one.csv" --repeats=x && has "--repeats wants a whole number"
# a flag given a value is refused, never the value read as the next argument (a plugin, the log)
run 2 info --json=pool && has "crmm info: --json takes no value" && lacks '"name": "pool"'
run 2 replay --strict=yes "$tmp/one.csv" && has "crmm replay: --strict takes no value"
run 2 check-config --help=x "$configs/good-full.ini" && has "crmm check-config: --help takes no value"
# "--=value" has no name: an argument like any other, whole in the message, for every command
run 2 info --=3 && has "crmm info: unexpected argument '--=3'"
run 2 bench --=3 && has "crmm bench: unknown option '--=3'"
# a flag of bench that the copy benchmark does not take, last: unknown, not 'missing value after'
run 2 bench --copy --json && has "crmm bench --copy: unknown option '--json'"
# $CRMM_CONFIG, and never a crmm.ini of the working directory
CRMM_CONFIG=$full
export CRMM_CONFIG
run 0 info && has "config: $full"
unset CRMM_CONFIG
mkdir "$tmp/repo"
printf '[crmm]\ndefault = evil\n[resource.evil]\nplugin = evil\n' >"$tmp/repo/crmm.ini"
abs_crmm=$(cd "$(dirname "$crmm")" && pwd)/$(basename "$crmm")
checks=$((checks + 1))
(cd "$tmp/repo" && unset CRMM_CONFIG && "$abs_crmm" info >"$tmp/out" 2>&1)
status=$?
if [ "$status" -ne 0 ] || grep -q "evil" "$tmp/out"; then
    fail "crmm info in a directory holding crmm.ini exited $status or used that file"
fi

# ---- info: settings, environment, one plugin ------------------------------------------------------
printf '[crmm]\nlog_level = error\ndefault = h\n[resource.h]\nplugin = host\n' >"$tmp/level.ini"
run 0 info --config "$tmp/level.ini" && has "[crmm]" "  default = h" "  plugin_path = (unset)" "  log_level = error" \
    "log level: error (from the config's log_level; CRMM_LOG_LEVEL would win)" "environment:" \
    "  CRMM_CONFIG            (unset)" "  CRMM_LOG_LEVEL         (unset)" "  CRMM_DEBUG_LOG_FILE    (unset)" \
    "  CRMM_LOG_FILE          (unset)"
CRMM_LOG_LEVEL=trace CRMM_LOG_FILE=/x/log.csv run 0 info --config "$tmp/level.ini" &&
    has "log level: trace (from CRMM_LOG_LEVEL, which wins over the config's log_level)" \
        "  CRMM_LOG_LEVEL         trace" "  CRMM_LOG_FILE          /x/log.csv"
unset CRMM_LOG_LEVEL CRMM_LOG_FILE # an assignment before a function call may outlive it (POSIX)
# $CRMM_LOG_LEVEL wins over the config's log_level in a program too: crmm_init logs its config at info
CRMM_CONFIG=$tmp/level.ini CRMM_LOG_LEVEL=info run 0 info && has "[info] crmm: config $tmp/level.ini"
unset CRMM_LOG_LEVEL
CRMM_CONFIG=$tmp/level.ini run 0 info && lacks "[info] crmm: config"
unset CRMM_CONFIG
run 0 info host && has "  host " "file: " "upstream: none" && lacks "plugin search path"
run 0 info pool && has "  pool " "initial_size" "stream_reuse" && lacks "  host "
run 1 info pol && has "no plugin 'pol'" "did you mean 'pool'?"
run 2 info host pool && has "unexpected argument 'pool'"

# ---- info --json ---------------------------------------------------------------------------------
CRMM_LOG_LEVEL=debug run 0 info --json --config "$tmp/level.ini" &&
    has '"version": "' '"plugin_abi": "2.' '"cuda": {"runtime": "' '"plugin_search_path": "' \
        '"name": "pool"' '"key": "stream_reuse", "type": "enum", "default": "sync", "required": false' \
        '"choices": "sync|event"' "\"origin\": \"$tmp/level.ini\"" '"default": "h"' '"log_level": "error"' \
        '{"name": "h", "plugin": "host", "upstream": null, "host_memory": true, "parameters": {}}' \
        '"config_error": null' '"log_level": {"level": "debug", "from": "CRMM_LOG_LEVEL"}' \
        '"CRMM_LOG_LEVEL": "debug"' '"CRMM_CONFIG": null'
unset CRMM_LOG_LEVEL
if command -v python3 >/dev/null 2>&1; then
    checks=$((checks + 1))
    python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["config"]["resources"][0]["name"] == "h"' \
        <"$tmp/out" || fail "crmm info --json is not JSON with the config's resources"
fi
run 1 info --json --config "$configs/bad-cycle.ini" && has '"config": null' '"config_error": "' 'upstream cycle'
run 0 info --json host && has '"name": "host"' '"upstream": "none"' '"parameters": []' && lacks '"environment"'

# ---- the program run from the build tree finds the build tree's plugins -----------------------------
if [ -z "$CRMM_TOOL" ] && [ -d plugins/built ]; then
    built=$(cd plugins/built && pwd)
    checks=$((checks + 1))
    env -u CRMM_PLUGIN_PATH -u CRMM_CONFIG "$crmm" info >"$tmp/out" 2>&1
    if ! grep -qF "plugin search path: $built" "$tmp/out" || grep -qF "(none found)" "$tmp/out"; then
        fail "crmm info without CRMM_PLUGIN_PATH, run from the build tree, does not search $built"
    fi
    has "  pool " "  host " "file: $built/crmm_pool.so"
    # a plugin file named by a path from the current directory, as the README's template is
    run 0 info plugins/built/crmm_host.so && has "  host " "file: plugins/built/crmm_host.so"
    run 0 info --markdown plugins/built/crmm_host.so && has "host"
    run 1 info plugins/none/crmm_none.so && has "plugin file plugins/none/crmm_none.so: No such file"
    # a user's CRMM_PLUGIN_PATH comes first
    saved_path=$CRMM_PLUGIN_PATH
    CRMM_PLUGIN_PATH=$tmp run 0 info --config "$tmp/level.ini" && has "plugin search path: $tmp:$built"
    CRMM_PLUGIN_PATH=$saved_path
    # a copy of the program outside the build tree does not search it
    real=$(dirname "$crmm")/.libs/crmm
    [ -x "$real" ] || real=$(dirname "$crmm")/.libs/lt-crmm
    if [ -x "$real" ]; then
        cp "$real" "$tmp/crmm-copy"
        checks=$((checks + 1))
        LD_LIBRARY_PATH=$(cd "$(dirname "$crmm")/../.libs" && pwd) env -u CRMM_PLUGIN_PATH "$tmp/crmm-copy" info >"$tmp/out" 2>&1
        if grep -qF "$built" "$tmp/out"; then
            fail "a crmm outside the build tree searched $built"
        fi
    fi
fi

# ---- without any NVIDIA driver, info says so (not "driver version is insufficient") ---------------
run 0 info --config "$tmp/level.ini"
if grep -q "^CUDA runtime .*, no driver$" "$tmp/out"; then
    has "no CUDA device: no NVIDIA driver"
    lacks "insufficient"
fi

# ---- replay: what other programs read from it -------------------------------------------------
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000001,allocate,0x1000,100,0\n' >"$tmp/replay.csv"
printf '2,10:00:00.000002,allocate,0x2000,5000,0\n1,10:00:00.000003,free,0x1000,100,0\n' >>"$tmp/replay.csv"
printf '[resource.h]\nplugin = host\n[resource.p]\nplugin = pool\nupstream = h\ninitial_size = 64KiB\n' \
    >"$tmp/replay.ini"
replay="replay $tmp/replay.csv --config $tmp/replay.ini --resource h --resource p --repeats 2"
for format in --text --json --csv; do
    [ "$format" = --text ] && format=
    # shellcheck disable=SC2086
    run 0 $replay $format || continue
    checks=$((checks + 1))
    if [ -n "$(tail -c 1 "$tmp/out")" ]; then
        fail "crmm replay ${format:-(text)}: the last line does not end with a newline"
    fi
done
has "resource,chain,stream" "h,host," "p,pool -> host,"
# a name that is no resource is refused before anything is replayed (the logging resource named
# first would have made its file)
cp "$tmp/replay.ini" "$tmp/replay-logged.ini"
printf '[resource.l]\nplugin = logging\nupstream = h\nfile = %s\n' "$tmp/replayed.csv" >>"$tmp/replay-logged.ini"
run 1 replay "$tmp/replay.csv" --config "$tmp/replay-logged.ini" --resource l --resource typo && has "has no resource 'typo'"
[ -e "$tmp/replayed.csv" ] && fail "crmm replay: a resource was replayed before a later --resource name was refused"
# shellcheck disable=SC2086
run 0 $replay --json
checks=$((checks + 1))
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert len(d["resources"]) == 2, d' \
        "$tmp/out" >/dev/null 2>&1 || fail "crmm replay --json is not JSON with two resources"
elif command -v jq >/dev/null 2>&1; then
    [ "$(jq '.resources | length' "$tmp/out" 2>/dev/null)" = 2 ] || fail "crmm replay --json is not JSON"
else
    echo "note: neither python3 nor jq: crmm replay --json not parsed"
fi
# shellcheck disable=SC2086
run 0 $replay --plot "$tmp/replay.svg"
checks=$((checks + 1))
if command -v xmllint >/dev/null 2>&1; then
    xmllint --noout "$tmp/replay.svg" >/dev/null 2>&1 || fail "crmm replay --plot: not well-formed XML"
elif command -v python3 >/dev/null 2>&1; then
    python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$tmp/replay.svg" >/dev/null 2>&1 ||
        fail "crmm replay --plot: not well-formed XML"
else
    echo "note: neither xmllint nor python3: the plot's XML not parsed"
fi
checks=$((checks + 1))
if [ "$(grep -c 'class="in-use"' "$tmp/replay.svg")" != 2 ] || [ "$(grep -c 'class="reserved"' "$tmp/replay.svg")" != 1 ]; then
    fail "crmm replay --plot: not one in-use line per resource and one reserved line (the pool's)"
fi
# a plot that cannot be written whole (the file size limit: EFBIG) leaves what was at its path,
# not the part written, and no file of its own beside it
printf 'kept\n' >"$tmp/kept.svg"
checks=$((checks + 1))
# shellcheck disable=SC2086
(trap '' XFSZ && ulimit -f 2 && exec "$crmm" $replay --plot "$tmp/kept.svg") >/dev/null 2>"$tmp/out"
status=$?
if [ "$status" -ne 1 ] || [ "$(cat "$tmp/kept.svg")" != kept ] || ls "$tmp" | grep -q 'kept\.svg\..*\.tmp'; then
    fail "crmm replay --plot past the file size limit exited $status, left $(wc -c <"$tmp/kept.svg") bytes at its path"
fi
has "cannot write $tmp/kept.svg"
# junk, NUL bytes first: an error naming the line, never 0 events and exit 0
printf '\000\001junk\nmore' >"$tmp/junk.bin"
run 1 replay "$tmp/junk.bin" --config "$tmp/replay.ini" && has "$tmp/junk.bin:1: the line holds a NUL byte"

# ---- bytes that are not UTF-8 (in a path, a config value, a name, the environment) ------------------
# The JSON outputs stay JSON (U+FFFD in their place) and the plot stays well-formed XML.
if command -v python3 >/dev/null 2>&1; then
    bad=$(printf 'x\377\300\355\240\200y')       # a stray byte, a cut sequence, a surrogate
    mkdir "$tmp/$bad" || fail "cannot make a directory named with bytes that are not UTF-8"
    printf '[crmm]\nplugin_path = %s\ndefault = h\n[resource.h]\nplugin = host\n' "$tmp/$bad" >"$tmp/$bad/ok.ini"
    printf '[resource.%s]\nplugin = host\n' "$bad" >"$tmp/$bad/badname.ini"
    cp "$tmp/replay.csv" "$tmp/$bad/log.csv"
    # json_ok FILE: strict UTF-8 JSON
    json_ok() {
        python3 -c 'import json, sys; json.loads(open(sys.argv[1], "rb").read().decode("utf-8", "strict"))' "$1" \
            >/dev/null 2>&1
    }
    for args in "info --json --config $tmp/$bad/ok.ini" "info --json --config $tmp/$bad/badname.ini" \
        "replay $tmp/$bad/log.csv --config $tmp/$bad/ok.ini --json" \
        "bench --json --config $tmp/$bad/ok.ini --repeats 1 --steps 100"; do
        checks=$((checks + 1))
        # shellcheck disable=SC2086
        CRMM_LOG_FILE="/tmp/$bad.csv" "$crmm" $args >"$tmp/out.json" 2>/dev/null
        json_ok "$tmp/out.json" || fail "crmm $args: the output is not UTF-8 JSON"
    done
    checks=$((checks + 1))
    grep -qF '\ufffd' "$tmp/out.json" || fail "crmm bench --json: no U+FFFD where the bytes were"
    run 0 replay "$tmp/$bad/log.csv" --config "$tmp/$bad/ok.ini" --plot "$tmp/plot.svg"
    checks=$((checks + 1))
    python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$tmp/plot.svg" >/dev/null 2>&1 ||
        fail "crmm replay --plot with a log path that is not UTF-8: not well-formed XML"
fi

# ---- output that cannot be written is an error, never exit 0 -----------------------------------------
if [ -w /dev/full ]; then
    for args in "info --config $tmp/level.ini" "info --json --config $tmp/level.ini" "info host" \
        "check-config $tmp/level.ini" "bench --json --config $tmp/level.ini --repeats 1 --steps 100" \
        "$replay" "$replay --json" "--version" "--help"; do
        checks=$((checks + 1))
        # shellcheck disable=SC2086
        "$crmm" $args >/dev/full 2>"$tmp/out"
        status=$?
        if [ "$status" -eq 0 ] || ! grep -q "cannot write standard output" "$tmp/out"; then
            fail "crmm $args >/dev/full exited $status without saying its output was lost"
        fi
    done
else
    echo "note: no writable /dev/full: output errors not checked"
fi

echo "check_tools: $checks checks, $failures failures ($nbad bad and $ngood good configs)"
[ "$failures" -eq 0 ]
