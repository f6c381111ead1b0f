#!/bin/sh
# check_file_policy.sh — `crmm replay --plot` writes its SVG as crmm writes every file
# (docs/files-and-privileges.md): a symbolic link or a hard link at the path is refused and the
# file behind it keeps its bytes; the user's own file is rewritten; a config others can write is
# refused by the tool too. No GPU needed. Run by `make check` like check_tools.sh.

here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_support.sh"
need_crmm

start_checks files
chmod 700 "$tmp"

printf 'Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000001,allocate,0x1000,100,0\n' >"$tmp/replay.csv"
printf '1,10:00:00.000003,free,0x1000,100,0\n' >>"$tmp/replay.csv"
printf '[resource.h]\nplugin = host\n' >"$tmp/replay.ini"
chmod 644 "$tmp/replay.ini"
replay="replay $tmp/replay.csv --config $tmp/replay.ini --resource h"
victim_text='bytes that must survive'

# a symbolic link, to a file and to nothing
printf '%s\n' "$victim_text" >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/link.svg"
ln -s "$tmp/absent" "$tmp/dangling.svg"
for target in link dangling; do
    if "$crmm" $replay --plot "$tmp/$target.svg" >"$tmp/out" 2>&1; then
        fail "crmm replay --plot $target.svg: a symbolic link was written through"
    elif ! grep -qF "$tmp/$target.svg: it is a symbolic link" "$tmp/out"; then
        fail "crmm replay --plot $target.svg: the error does not say it is a link"
    fi
done
[ "$(cat "$tmp/victim")" = "$victim_text" ] || fail "the file behind the link was changed"
[ -e "$tmp/absent" ] && fail "the file a dangling link names was created"

# a link to a stream: written through, and still a link afterwards (not replaced by a file)
ln -s /dev/null "$tmp/null.svg"
"$crmm" $replay --plot "$tmp/null.svg" >"$tmp/out" 2>&1 || fail "crmm replay --plot null.svg failed: $(cat "$tmp/out")"
[ -L "$tmp/null.svg" ] || fail "crmm replay --plot: the link to /dev/null was replaced by a file"
ls "$tmp"/null.svg.*.tmp >/dev/null 2>&1 && fail "crmm replay --plot: a temporary file was left beside the link"

# a hard link
ln "$tmp/victim" "$tmp/hard.svg"
"$crmm" $replay --plot "$tmp/hard.svg" >"$tmp/out" 2>&1 && fail "crmm replay --plot: a hard-linked file was written"
grep -qF "2 hard links" "$tmp/out" || fail "crmm replay --plot: the error does not name the hard links"
[ "$(cat "$tmp/victim")" = "$victim_text" ] || fail "the hard-linked file was changed"

# the user's own file: rewritten, as before
printf 'an old plot, longer than nothing\n' >"$tmp/own.svg"
"$crmm" $replay --plot "$tmp/own.svg" >"$tmp/out" 2>&1 || fail "crmm replay --plot own.svg failed"
head -c 5 "$tmp/own.svg" | grep -qF '<?xml' || fail "crmm replay --plot: the own file was not rewritten"
grep -qF 'an old plot' "$tmp/own.svg" && fail "crmm replay --plot: the old content survived"

# a config others can write
chmod 646 "$tmp/replay.ini"
"$crmm" check-config "$tmp/replay.ini" >"$tmp/out" 2>&1 && fail "crmm check-config: a config others can write passed"
grep -qF "refusing config $tmp/replay.ini: it is writable by others" "$tmp/out" ||
    fail "crmm check-config: the refusal does not name the config and why"

# a logging resource of the replayed chain that names the log is refused before it truncates it
printf '[resource.h]\nplugin = host\n[resource.l]\nplugin = logging\nupstream = h\nfile = %s\n' "$tmp/replay.csv" \
    >"$tmp/logs-to-log.ini"
chmod 644 "$tmp/logs-to-log.ini"
cp "$tmp/replay.csv" "$tmp/replay.before"
"$crmm" replay "$tmp/replay.csv" --config "$tmp/logs-to-log.ini" --resource l >"$tmp/out" 2>&1 &&
    fail "crmm replay: a logging resource writing to the log it replays was built"
grep -qF "crmm replay is reading it" "$tmp/out" || fail "crmm replay: the refusal does not say why: $(cat "$tmp/out")"
cmp -s "$tmp/replay.csv" "$tmp/replay.before" || fail "crmm replay: the log it replayed was rewritten"

[ "$failures" -eq 0 ] || exit 1
echo "PASS: replay --plot and check-config follow the file policy"
exit 0
