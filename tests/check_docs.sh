#!/bin/sh
# check_docs.sh — the man pages and the bash completion against the tool: crmm.ini(5) has a
# subsection for every plugin the build installs and an entry for each of its parameters (as
# `crmm info PLUGIN` lists them); every page renders without warnings where man is installed;
# the completion offers every subcommand of `crmm --help` and every option of each one's --help,
# and plugin names after `crmm info`. Run by `make check` like check_tools.sh.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_support.sh"
srcdir=$(cd "${CRMM_TEST_SRCDIR:-$here}/.." && pwd)
page=doc/crmm.ini.5
if [ ! -x "$crmm" ] || [ ! -f "$page" ]; then
    echo "FAIL: no tools/crmm or $page in $(pwd)"
    exit 1
fi
start_checks docs

# ---- crmm.ini(5) covers every installed plugin and parameter -----------------------------------
nplugins=0
nkeys=0
for so in plugins/*/.libs/crmm_*.so; do
    name=$(basename "$so" .so)
    name=${name#crmm_}
    nplugins=$((nplugins + 1))
    checks=$((checks + 1))
    grep -qx ".SS $name" "$page" || fail "$page has no subsection for plugin $name"
    "$crmm" info "$(pwd)/$so" >"$tmp/info" 2>&1 || { fail "crmm info $so"; continue; }
    for key in $(sed -n 's/^    \([a-z_][a-z0-9_]*\)  *\(bool\|int\|uint\|size\|double\|string\|enum\) .*/\1/p' "$tmp/info"); do
        nkeys=$((nkeys + 1))
        checks=$((checks + 1))
        # the key's entry in this plugin's subsection
        sed -n "/^\.SS $name\$/,/^\.S[SH] /p" "$page" | grep -qx ".B $key" ||
            fail "$page lacks parameter $key of plugin $name"
    done
done
[ "$nplugins" -ge 15 ] && [ "$nkeys" -ge 20 ] || fail "only $nplugins plugins and $nkeys parameters checked"
checks=$((checks + 1))
grep -q '^@PLUGINS@' "$page" && fail "$page still holds its @PLUGINS@ marker"
for key in default plugin_path log_level; do
    checks=$((checks + 1))
    grep -qx ".B $key" "$page" || fail "$page lacks the [crmm] key $key"
done

# ---- crmm-plugin(7) keeps up with the plugin ABI ---------------------------------------------------
# Every function member of crmm_resource_ops and crmm_plugin is named in the page (an author with
# only the installed crmm reads it), and the page has the section the loader's message for an
# ABI 1.x plugin sends its author to.
man7="$srcdir/doc/crmm-plugin.7"
nmembers=0
for m in $(sed -n '/^typedef struct crmm_resource_ops {/,/^}/s/.*(\*\([a-z_]*\))(.*/\1/p' "$srcdir/include/crmm/resource.h") \
    $(sed -n '/^typedef struct crmm_plugin {/,/^}/s/.*(\*\([a-z_]*\))(.*/\1/p' "$srcdir/include/crmm/plugin.h"); do
    checks=$((checks + 1))
    nmembers=$((nmembers + 1))
    grep -Eq "^\.BR? $m( |\$)" "$man7" || fail "crmm-plugin(7) does not name the member $m"
done
[ "$nmembers" -ge 10 ] || fail "found only $nmembers function members of crmm_resource_ops and crmm_plugin"
section=$(sed -n 's/.*(man crmm-plugin, \([A-Z0-9 .x]*\);.*/\1/p' "$srcdir/libcrmm/plugin_loader.c")
checks=$((checks + 1))
[ -n "$section" ] && grep -qx ".SH $section" "$man7" ||
    fail "crmm-plugin(7) has no section '$section', which the loader's ABI 1.x message names"

# ---- every page renders cleanly -------------------------------------------------------------------
if command -v groff >/dev/null 2>&1; then
    for p in "$page" "$srcdir/doc/crmm.1" "$srcdir/doc/crmm-plugin.7"; do
        checks=$((checks + 1))
        groff -man -Tutf8 -ww -z "$p" >"$tmp/groff" 2>&1
        [ -s "$tmp/groff" ] && { fail "groff warns about $p"; sed 's/^/    | /' "$tmp/groff" | head -5; }
    done
else
    echo "note: groff not installed; the pages' rendering is not checked"
fi

# ---- bash completion -------------------------------------------------------------------------------
if command -v bash >/dev/null 2>&1; then
    # complete WORD...: the completions of the last word of "crmm WORD..." (crmm = the build's tool)
    complete_words() {
        CRMM_PROG=$crmm bash -c '. "$0"; COMP_WORDS=("$CRMM_PROG" "$@"); COMP_CWORD=$#; _crmm; printf "%s\n" "${COMPREPLY[@]}"' \
            "$srcdir/tools/completion/crmm" "$@"
    }
    complete_words "" >"$tmp/c"
    for c in $("$crmm" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p'); do
        checks=$((checks + 1))
        grep -qx "$c" "$tmp/c" || fail "completion of 'crmm ' lacks $c"
    done
    for c in info check-config bench replay; do
        complete_words "$c" "--" >"$tmp/c"
        for o in $("$crmm" "$c" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
            checks=$((checks + 1))
            grep -qx -- "$o" "$tmp/c" || fail "completion of 'crmm $c --' lacks $o"
        done
    done
    complete_words info po >"$tmp/c"
    checks=$((checks + 1))
    grep -qx pool "$tmp/c" || fail "completion of 'crmm info po' lacks pool"
    complete_words bench --set "" >"$tmp/c"
    checks=$((checks + 1))
    grep -qx A "$tmp/c" || fail "completion of 'crmm bench --set ' lacks A"
fi

echo "check_docs: $checks checks, $failures failures ($nplugins plugins, $nkeys parameters)"
[ "$failures" -eq 0 ]
