# script_support.sh — what the shell tests share; a test sources it ( . "$here/script_support.sh",
# `here` being the test's own directory) and gets:
#  - crmm: the program under test: $CRMM_TOOL, else ./tools/crmm (make check runs the tests from
#    the top build directory, also in a VPATH build such as distcheck, where the scripts live in
#    the source tree), else the one beside the source tree;
#  - start_checks NAME: a fresh temporary directory $tmp (removed at exit) and the counters
#    $failures and $checks at 0;
#  - fail MESSAGE: counts a failure and shows the start of the last output, $tmp/out (20 lines,
#    2000 bytes at most);
#  - run EXPECTED_STATUS ARGS...: crmm ARGS with stdout and stderr in $tmp/out; a check of its status.

if [ -n "$CRMM_TOOL" ]; then
    crmm=$CRMM_TOOL
elif [ -x ./tools/crmm ]; then
    crmm=./tools/crmm
else
    crmm=$here/../tools/crmm
fi

start_checks() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/crmm-$1-XXXXXX") || exit 1
    trap 'rm -rf "$tmp"' EXIT INT TERM
    failures=0
    checks=0
}

fail() {
    failures=$((failures + 1))
    echo "FAIL: $*"
    if [ -s "$tmp/out" ]; then head -c 2000 "$tmp/out" | sed 's/^/    | /' | head -20; fi
}

run() {
    want=$1
    shift
    checks=$((checks + 1))
    "$crmm" "$@" >"$tmp/out" 2>&1
    got=$?
    if [ "$got" -ne "$want" ]; then
        fail "crmm $* exited $got, expected $want"
        return 1
    fi
}
