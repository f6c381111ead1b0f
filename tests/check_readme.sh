#!/bin/sh
# check_readme.sh — the README as a new user follows it, without a GPU: every ```c block is
# compiled as written with `pkg-config --cflags --libs crmm` (the build tree's
# crmm-uninstalled.pc) and -Werror; the programs run over the README's host.ini and check their
# statuses; the template plugin (the README's block if it has one, which must equal
# plugins/template/template_plugin.c, else that file, which the README points to) is built out
# of tree as its "Writing a plugin" section says, and a program allocates through it over the
# README's template.ini. The plugin table is checked against the plugins' parameter rows.
#
# Run by `make check` from the top build directory; CRMM_TEST_SRCDIR names the source's tests/.
# CRMM_TEST_CC, CRMM_TEST_CFLAGS and CRMM_TEST_LDFLAGS give the compiler and its flags.

here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_support.sh"
srcdir=$(cd "${CRMM_TEST_SRCDIR:-$(dirname "$0")}/.." && pwd)
build=$(pwd)
readme=$srcdir/README.md
cc=${CRMM_TEST_CC:-cc}
cflags=${CRMM_TEST_CFLAGS:--std=c11 -Wall -Wextra -Werror}
ldflags=${CRMM_TEST_LDFLAGS:-}
crmm=$build/tools/crmm
if [ ! -f "$readme" ] || [ ! -f "$build/crmm-uninstalled.pc" ] || [ ! -x "$crmm" ]; then
    echo "FAIL: no README ($readme), crmm-uninstalled.pc or tools/crmm in $build"
    exit 1
fi
PKG_CONFIG_PATH=$build
export PKG_CONFIG_PATH
pc_cflags=$(pkg-config --cflags crmm) && pc_libs=$(pkg-config --libs crmm) || { echo "FAIL: pkg-config crmm"; exit 1; }

start_checks readme

# Each fenced block of language $1 into $tmp/$1.N (N from 1), in README order.
awk -v dir="$tmp" '
    /^```/ && inside { inside = 0; close(file); next }
    /^```[a-z]+$/ && !inside { lang = substr($0, 4); n[lang]++; file = dir "/" lang "." n[lang]; inside = 1; printf "" > file; next }
    inside { print > file }
' "$readme"

# ---- the config files: named by their first line ("; NAME.ini — ...") -----------------------------
for f in "$tmp"/ini.*; do
    name=$(sed -n '1s/^; \([a-z_]*\.ini\) .*/\1/p' "$f")
    [ -n "$name" ] && cp "$f" "$tmp/$name"
done
for name in host.ini template.ini; do
    checks=$((checks + 1))
    [ -f "$tmp/$name" ] || fail "the README has no ini block opening with '; $name'"
done

# ---- the C blocks ----------------------------------------------------------------------------------
nprog=0
nplugin=0
for f in "$tmp"/c.*; do
    first=$(head -n 1 "$f")
    name=$(printf '%s\n' "$first" | sed -n 's|^/\* \([a-z_]*\)\.c .*|\1|p')
    checks=$((checks + 1))
    if [ -z "$name" ]; then
        fail "a C block of the README does not open with '/* NAME.c — ...': $first"
        continue
    fi
    cp "$f" "$tmp/$name.c"
    if [ "$name" = template_plugin ]; then
        nplugin=$((nplugin + 1))
        checks=$((checks + 1))
        cmp -s "$tmp/$name.c" "$srcdir/plugins/template/template_plugin.c" ||
            fail "the README's template_plugin.c differs from plugins/template/template_plugin.c"
        mkdir -p "$tmp/plugins" && chmod 755 "$tmp/plugins"
        # as the README says: cc -shared -fPIC -o crmm_template.so template_plugin.c $(pkg-config ...)
        checks=$((checks + 1))
        $cc $cflags -shared -fPIC -o "$tmp/plugins/crmm_template.so" "$tmp/$name.c" $pc_cflags $pc_libs $ldflags \
            >"$tmp/out" 2>&1 || fail "the README's template plugin does not build out of tree"
        continue
    fi
    nprog=$((nprog + 1))
    checks=$((checks + 1))
    $cc $cflags -o "$tmp/$name" "$tmp/$name.c" $pc_cflags $pc_libs $ldflags >"$tmp/out" 2>&1 ||
        fail "the README's $name.c does not compile as written"
done
if [ "$nplugin" -eq 0 ]; then
    # the README points to the template's source instead of copying it: build that file as the
    # README says (cp .../template_plugin.c . && cc -shared -fPIC -o crmm_template.so ...); its cp
    # line is run as written, with crmm-uninstalled.pc standing for the installed crmm.pc
    nplugin=1
    mkdir -p "$tmp/plugins" && chmod 755 "$tmp/plugins"
    cpline=$(sed -n '/^## Writing a plugin$/,/^## /s/^    \(cp .*template_plugin\.c.*\)$/\1/p' "$readme")
    checks=$((checks + 1))
    if [ -z "$cpline" ]; then
        fail "no 'cp ...template_plugin.c .' line under the README's 'Writing a plugin'"
        cp "$srcdir/plugins/template/template_plugin.c" "$tmp/template_plugin.c"
    else
        (cd "$tmp" && eval "$cpline") >"$tmp/out" 2>&1 ||
            { fail "the README's '$cpline' fails"; sed 's/^/    | /' "$tmp/out" | head -3; }
        checks=$((checks + 1))
        cmp -s "$tmp/template_plugin.c" "$srcdir/plugins/template/template_plugin.c" ||
            fail "the README's '$cpline' does not copy plugins/template/template_plugin.c"
    fi
    checks=$((checks + 1))
    $cc $cflags -shared -fPIC -o "$tmp/plugins/crmm_template.so" "$tmp/template_plugin.c" $pc_cflags $pc_libs $ldflags \
        >"$tmp/out" 2>&1 || fail "plugins/template/template_plugin.c does not build out of tree as the README says"
fi
# authors copy the template into their own builds, whatever the compiler: it builds with clang's
# warnings as errors too (clang -Wextra, unlike gcc's, calls a {NULL} row a missing initializer)
if command -v clang >/dev/null 2>&1; then
    checks=$((checks + 1))
    clang $cflags -shared -fPIC -o "$tmp/crmm_template_clang.so" "$srcdir/plugins/template/template_plugin.c" \
        $pc_cflags $pc_libs $ldflags >"$tmp/out" 2>&1 ||
        { fail "plugins/template/template_plugin.c does not build with clang $cflags"; sed 's/^/    | /' "$tmp/out" | head -5; }
else
    echo "note: clang not installed; the template's build with clang is not checked"
fi
if [ "$nprog" -lt 2 ] || [ "$nplugin" -ne 1 ]; then
    fail "found $nprog programs and $nplugin plugins in the README's C blocks (expected 2 and 1)"
fi

# run NAME STATUS [ENV...]: runs $tmp/NAME with the environment given; checks its exit status
run() {
    prog=$1 want=$2
    shift 2
    checks=$((checks + 1))
    if [ ! -x "$tmp/$prog" ]; then
        fail "$prog was not built"
        return 1
    fi
    env -u CRMM_CONFIG "$@" "$tmp/$prog" >"$tmp/out" 2>&1
    got=$?
    [ "$got" -eq "$want" ] || { fail "$prog exited $got, expected $want"; return 1; }
}

# The first example over host.ini: memory from the pool, with or without a GPU.
run example 0 CRMM_CONFIG="$tmp/host.ini" && has "1048576 bytes at 0x" && has "from 'pool'"
# A bad config: the example says why and fails instead of using a pointer it never got.
printf '[crmm]\ndefault = nothing\n' >"$tmp/bad.ini"
run example 1 CRMM_CONFIG="$tmp/bad.ini" && has "$tmp/bad.ini:2: "

# The device-buffer example needs a GPU: with one it prints the seed's values, without one it
# stops at its first call with crmm's reason.
n_gpu=$("$crmm" info --config "$tmp/host.ini" 2>/dev/null | grep -c '^device [0-9]*: ')
if [ "$n_gpu" -gt 0 ]; then
    printf '[resource.gpu]\nplugin = cuda\n' >"$tmp/gpu.ini"
    run buffers 0 CRMM_CONFIG="$tmp/gpu.ini" && has "97 98 99 0 0 abc"
else
    run buffers 1 CRMM_CONFIG="$tmp/host.ini" && has "crmm_device_buffer_create(5, NULL, NULL, &db): "
fi

# The plugin guide: check-config, info TEMPLATE, and the first example allocating through it.
checks=$((checks + 1))
CRMM_PLUGIN_PATH=$tmp/plugins "$crmm" check-config "$tmp/template.ini" >"$tmp/out" 2>&1 ||
    fail "crmm check-config template.ini with the template plugin built from the README"
CRMM_PLUGIN_PATH=$tmp/plugins "$crmm" info --config "$tmp/template.ini" template >"$tmp/out" 2>&1
has "file: $tmp/plugins/crmm_template.so"
# (the installed plugins are searched last; here the build tree's stand for them)
run example 0 CRMM_CONFIG="$tmp/template.ini" CRMM_PLUGIN_PATH="$tmp/plugins:$CRMM_PLUGIN_PATH" && has "from 'template'"

# pkg-config gives what the README's programs need
checks=$((checks + 1))
case " $pc_libs " in *" -lcudart "*) ;; *) fail "pkg-config --libs crmm lacks -lcudart: $pc_libs" ;; esac
checks=$((checks + 1))
[ -d "$(pkg-config --variable=pluginlibdir crmm)" ] || fail "pkg-config --variable=pluginlibdir crmm is no directory"
checks=$((checks + 1))
grep -q '^Libs: .*-lcrmm .*-lcudart' "$build/crmm.pc" || fail "crmm.pc's Libs lack -lcudart"

# The plugin table under "### The plugins" is what the plugins' own rows say: each row equal to
# what `crmm info --markdown` prints for its plugin, and a row for every plugin the build makes
# (but the template, which "Writing a plugin" is about).
sed -n '/^### The plugins$/,/^##/p' "$readme" | grep '^| `' >"$tmp/table"
table_names=$(sed 's/^| `\([a-z0-9_]*\)`.*/\1/' "$tmp/table")
checks=$((checks + 1))
if "$crmm" info --markdown $table_names >"$tmp/generated" 2>"$tmp/out"; then
    diff "$tmp/generated" "$tmp/table" >"$tmp/out" ||
        fail "the README's plugin table differs from the plugins' parameter rows (< crmm info --markdown, > README)"
else
    fail "crmm info --markdown $table_names"
fi
: >"$tmp/out"
for so in "$build"/plugins/*/.libs/crmm_*.so; do
    name=$(basename "$so" .so)
    name=${name#crmm_}
    [ "$name" = template ] && continue
    checks=$((checks + 1))
    echo "$table_names" | grep -qx "$name" || fail "the README's plugin table has no row for plugin $name"
done

# The README's table of variables names exactly the variables of crmm_settings(), as `crmm info`
# lists them.
"$crmm" info >"$tmp/info" 2>&1
sed -n '/^environment:$/,$s/^  \(CRMM_[A-Z_]*\) .*/\1/p' "$tmp/info" | sort >"$tmp/vars"
sed -n 's/^| `\(CRMM_[A-Z_]*\)` |.*/\1/p' "$readme" | sort >"$tmp/readme_vars"
checks=$((checks + 1))
if [ ! -s "$tmp/vars" ] || ! diff "$tmp/vars" "$tmp/readme_vars" >"$tmp/out"; then
    fail "the README's table of variables differs from crmm_settings() (< crmm info, > README)"
fi

echo "check_readme: $checks checks, $failures failures ($nprog programs, $nplugin plugin)"
[ "$failures" -eq 0 ]
