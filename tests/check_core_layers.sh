#!/bin/sh
# check_core_layers.sh — the core has no loop: among libcrmm's sources and public headers no
# #include cycle, no plugin header included (plugins/...), and among libcrmm's objects no call
# cycle between two files (file A calls a function defined in B and B one defined in A, directly
# or around a longer ring), read from `nm` of the built objects. Skips (77) without python3 or nm.
#
# Run by `make check` from the top build directory; CRMM_TEST_SRCDIR gives tests/ in the source
# tree (VPATH builds).

here=$(cd "$(dirname "$0")" && pwd)
srcdir=$(cd "${CRMM_TEST_SRCDIR:-$here}/.." && pwd)
command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
ls libcrmm/.libs/*.o >/dev/null 2>&1 || { echo "FAIL: no libcrmm/.libs/*.o in $(pwd)"; exit 1; }
exec python3 - "$srcdir" <<'PY'
import collections, glob, os, re, subprocess, sys
src = sys.argv[1]
files = glob.glob(os.path.join(src, 'libcrmm', '*.[ch]')) + glob.glob(os.path.join(src, 'include', 'crmm', '*.h'))
edges = collections.defaultdict(set)
bad = []
for f in files:
    for m in re.finditer(r'#include\s+[<"]([^>"]+)[>"]', open(f).read()):
        for cand in (os.path.join(os.path.dirname(f), m.group(1)), os.path.join(src, 'include', m.group(1))):
            if os.path.exists(cand):
                cand = os.path.relpath(os.path.realpath(cand), src)
                edges[os.path.relpath(f, src)].add(cand)
                if cand.startswith('plugins' + os.sep):
                    bad.append('%s includes the plugin header %s' % (os.path.relpath(f, src), cand))
                break
defined, used = {}, collections.defaultdict(set)
for o in glob.glob('libcrmm/.libs/*.o'):
    mod = re.sub(r'^[a-z_]*la-', '', os.path.basename(o))[:-2]
    for line in subprocess.run(['nm', o], capture_output=True, text=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in 'TDBR':
            defined[p[2]] = mod
        elif len(p) == 2 and p[0] == 'U':
            used[mod].add(p[1])
calls = collections.defaultdict(set)
for mod, names in used.items():
    for n in names:
        if n in defined and defined[n] != mod:
            calls[mod].add(defined[n])

def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))
    for v in list(graph):
        if v not in index:
            visit(v)
    return found

bad += ['#include cycle: ' + ' -> '.join(c) for c in cycles(edges)]
bad += ['call cycle between objects: ' + ', '.join(c) for c in cycles(calls)]
if len(set(defined.values())) < 10:
    bad.append('only %d objects read from libcrmm/.libs' % len(set(defined.values())))
for b in bad:
    print('FAIL:', b)
print('%d sources and headers, %d objects: %s' % (len(files), len(set(defined.values())), 'loops found' if bad else 'no loop'))
sys.exit(1 if bad else 0)
PY
