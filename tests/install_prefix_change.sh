#!/bin/sh
# install_prefix_change.sh — `make install` after a reconfigure to another prefix, as a user does
# it: configure and build for one prefix, configure again for another, build, install. Every
# plugin must land in the new $(libdir)/crmm, and the installed tool, given the private prefix's
# lib directory in LD_LIBRARY_PATH, must find them there and nothing of the first prefix.
#
# Usage: install_prefix_change.sh [SRCDIR]  (default: the source tree holding this script; it
# must not be configured in-tree). Builds in a temporary directory; .ci/run runs it. Takes a
# full build (two configures); not part of `make check`.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "${1:-$here/..}" && pwd)
jobs=${JOBS:-2}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/crmm-prefix-XXXXXX") || exit 1
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT INT TERM
fail() { echo "FAIL: $*"; exit 1; }

if [ -f "$src/config.status" ]; then
    fail "$src is configured in-tree; run 'make distclean' there first"
fi
mkdir "$tmp/build" && cd "$tmp/build" || exit 1
"$src/configure" --prefix="$tmp/first" >configure1.log 2>&1 || fail "first configure (see $tmp/build/configure1.log)"
make -j"$jobs" >make1.log 2>&1 || { tail -20 make1.log; fail "first make"; }
"$src/configure" --prefix="$tmp/second" >configure2.log 2>&1 || fail "second configure"
make -j"$jobs" >make2.log 2>&1 || { tail -20 make2.log; fail "second make"; }
make install >install.log 2>&1 || { tail -20 install.log; fail "make install after a reconfigure to another prefix"; }

[ -d "$tmp/first" ] && fail "something was installed under the first prefix"
n=0
for la in "$tmp"/build/plugins/*/crmm_*.la; do
    name=$(basename "$la" .la)
    n=$((n + 1))
    [ -f "$tmp/second/lib/crmm/$name.so" ] || fail "$name.so is not installed in $tmp/second/lib/crmm"
done
[ "$n" -ge 15 ] || fail "only $n plugins were built"
[ -f "$tmp/second/lib/libcrmm.so" ] || fail "libcrmm.so is not installed"
[ -f "$tmp/second/etc/crmm/crmm.ini" ] || fail "crmm.ini is not installed"
for f in share/man/man1/crmm.1 share/man/man5/crmm.ini.5 share/man/man7/crmm-plugin.7 \
    share/bash-completion/completions/crmm share/crmm/template/template_plugin.c lib/pkgconfig/crmm.pc; do
    [ -f "$tmp/second/$f" ] || fail "$f is not installed"
done
pld=$(PKG_CONFIG_PATH="$tmp/second/lib/pkgconfig" pkg-config --variable=pluginlibdir crmm)
[ "$pld" = "$tmp/second/lib/crmm" ] || fail "pkg-config --variable=pluginlibdir crmm gives '$pld'"
# the README copies the template from pkg-config's templatedir
td=$(PKG_CONFIG_PATH="$tmp/second/lib/pkgconfig" pkg-config --variable=templatedir crmm)
[ -f "$td/template_plugin.c" ] || fail "pkg-config --variable=templatedir crmm gives '$td', without template_plugin.c"

# the installed tool, with the private prefix on the library path: it searches the new plugin
# directory (compiled into libcrmm) and loads every plugin from there
out=$(env -u CRMM_PLUGIN_PATH -u CRMM_CONFIG LD_LIBRARY_PATH="$tmp/second/lib" "$tmp/second/bin/crmm" info 2>&1)
printf '%s\n' "$out" | grep -qF "plugin search path: $tmp/second/lib/crmm" || { printf '%s\n' "$out" | head; fail "search path"; }
printf '%s\n' "$out" | grep -qF "config: $tmp/second/etc/crmm/crmm.ini" || { printf '%s\n' "$out" | tail; fail "installed config not used"; }
loaded=$(printf '%s\n' "$out" | grep -c "^    file: $tmp/second/lib/crmm/crmm_")
[ "$loaded" -eq "$n" ] || fail "the installed tool loaded $loaded of $n plugins from $tmp/second/lib/crmm"
printf '%s\n' "$out" | grep -qF "$tmp/build" && fail "the installed tool uses the build tree"
echo "install_prefix_change: $n plugins installed and loaded from the second prefix"
