#!/bin/sh
# check_exports.sh — libcrmm.so exports exactly the functions its public headers declare: every
# name `nm -D` lists as defined is declared CRMM_API in include/crmm/*.h, every CRMM_API name is
# exported, and no function declared at file scope in a public header lacks CRMM_API (else it
# would be hidden by -fvisibility=hidden); and each plugin built, plugins/built/crmm_*.so, exports
# crmm_plugin_entry and nothing else (the helpers of plugins/common that several plugins link in
# stay each plugin's own). Skips (77) where nm is missing. Run by `make check` from
# the top build directory; CRMM_TEST_SRCDIR gives tests/ in the source tree (VPATH builds).

here=$(cd "$(dirname "$0")" && pwd)
srcdir=${CRMM_TEST_SRCDIR:-$here}
headers=$srcdir/../include/crmm
lib=./.libs/libcrmm.so
command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm"; exit 77; }
if [ ! -f "$lib" ] || [ ! -d "$headers" ]; then
    echo "FAIL: no $lib or no $headers"
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/crmm-exports-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
status=0

# the name of each CRMM_API declaration: the identifier right before the first '('
grep -h '^CRMM_API ' "$headers"/*.h | sed 's/(.*//; s/.*[^A-Za-z0-9_]//' | sort -u >"$tmp/declared"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBRV]$/ {print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"

comm -23 "$tmp/exported" "$tmp/declared" >"$tmp/undeclared"
comm -13 "$tmp/exported" "$tmp/declared" >"$tmp/missing"
if [ -s "$tmp/undeclared" ]; then
    echo "FAIL: exported but not declared CRMM_API in include/crmm:"
    sed 's/^/  /' "$tmp/undeclared"
    status=1
fi
if [ -s "$tmp/missing" ]; then
    echo "FAIL: declared CRMM_API but not exported by libcrmm.so:"
    sed 's/^/  /' "$tmp/missing"
    status=1
fi
# file-scope function declarations without the macro (static inline ones are in the header)
grep -nE '^[A-Za-z_][A-Za-z0-9_ *]*[A-Za-z0-9_]\(' "$headers"/*.h |
    grep -vE ':(CRMM_API|static|typedef|extern|#)' >"$tmp/unmarked"
if [ -s "$tmp/unmarked" ]; then
    echo "FAIL: public functions declared without CRMM_API:"
    sed 's/^/  /' "$tmp/unmarked"
    status=1
fi
if [ ! -s "$tmp/declared" ]; then
    echo "FAIL: no CRMM_API declaration found in $headers"
    status=1
fi
plugins=0
for so in ./plugins/built/crmm_*.so; do
    [ -f "$so" ] || continue
    plugins=$((plugins + 1))
    names=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TWDBRV]$/ {print $3}' | sed 's/@.*//' | sort -u | tr '\n' ' ')
    if [ "$names" != "crmm_plugin_entry " ]; then
        echo "FAIL: $so exports more or less than crmm_plugin_entry: $names"
        status=1
    fi
done
if [ $plugins -eq 0 ]; then
    echo "FAIL: no plugin in ./plugins/built"
    status=1
fi
[ $status -eq 0 ] && echo "PASS: $(wc -l <"$tmp/exported") exported names, each declared; $plugins plugins export only their entry"
exit $status
