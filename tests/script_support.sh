# script_support.sh — what the shell tests share; a test sources it ( . "$here/script_support.sh",
# `here` being the test's own directory) and gets:
#  - crmm: the program under test: $CRMM_TOOL, else ./tools/crmm (make check runs the tests from
#    the top build directory, also in a VPATH build such as distcheck, where the scripts live in
#    the source tree), else the one beside the source tree;
#  - start_checks NAME: a fresh temporary directory $tmp (removed at exit) and the counters
#    $failures and $checks at 0;
#  - fail MESSAGE: counts a failure and shows the start of the last output, $tmp/out (20 lines,
#    2000 bytes at most);
#  - run EXPECTED_STATUS ARGS...: crmm ARGS with stdout and stderr in $tmp/out; a check of its status;
#  - has TEXT...: a check that $tmp/out holds each TEXT (fixed strings); has_line TEXT...: each TEXT
#    as a whole line of it; lacks TEXT: a check that it does not hold TEXT;
#  - need_crmm: ends the test (FAIL) when there is no crmm program.

# Files the tests write get mode 0644 whatever umask they were started with: crmm refuses a
# config that others may write.
umask 022

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

has() {
    for t in "$@"; do
        checks=$((checks + 1))
        grep -qF -- "$t" "$tmp/out" || fail "output of the last command lacks '$t'"
    done
}

has_line() {
    for t in "$@"; do
        checks=$((checks + 1))
        grep -qxF -- "$t" "$tmp/out" || fail "output of the last command lacks the line '$t'"
    done
}

lacks() {
    checks=$((checks + 1))
    if grep -qF -- "$1" "$tmp/out"; then
        fail "output of the last command has '$1'"
    fi
}

need_crmm() {
    [ -x "$crmm" ] || { echo "FAIL: no crmm program ($crmm)"; exit 1; }
}
