#!/bin/sh
# check_core_layers.sh — the core and the plugins have no loop: among libcrmm's sources and public
# headers no #include cycle, no plugin header included (plugins/...), and among libcrmm's objects
# no call cycle between two files (file A calls a function defined in B and B one defined in A,
# directly or around a longer ring), read from `nm` of the built objects. Likewise within each
# plugin's folder (its files and plugins/common's): no #include or call cycle, and no file that
# includes another plugin's private files (what two plugins share lives in plugins/common).
# Skips (77) without python3 or nm.
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

def object_calls(objects):
    """{file: {files whose functions it calls}} among the given objects."""
    where, needs = {}, collections.defaultdict(set)
    for o in objects:
        mod = os.path.join(os.path.dirname(os.path.dirname(o)), re.sub(r'^[a-z_]*la-', '', os.path.basename(o))[:-2])
        for line in subprocess.run(['nm', o], capture_output=True, text=True).stdout.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in 'TDBR':
                where[p[2]] = mod
            elif len(p) == 2 and p[0] == 'U':
                needs[mod].add(p[1])
    graph = collections.defaultdict(set)
    for mod, names in needs.items():
        graph[mod] |= {where[n] for n in names if n in where and where[n] != mod}
    return graph

libcrmm_objects = glob.glob('libcrmm/.libs/*.o')
calls = object_calls(libcrmm_objects)

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
if len(libcrmm_objects) < 10:
    bad.append('only %d objects read from libcrmm/.libs' % len(libcrmm_objects))

# ---- the plugins: each folder with plugins/common, by its sources and its built objects ----------
plugin_dirs = sorted(d for d in glob.glob(os.path.join(src, 'plugins', '*')) if os.path.isdir(d))
plugin_edges = collections.defaultdict(set)
plugin_objects = 0
for d in plugin_dirs:
    name = os.path.basename(d)
    for f in glob.glob(os.path.join(d, '*.[ch]')):
        rel = os.path.relpath(f, src)
        for m in re.finditer(r'#include\s+"([^"]+)"', open(f).read()):
            cand = os.path.normpath(os.path.join(os.path.dirname(f), m.group(1)))
            if not os.path.exists(cand):
                continue
            target = os.path.relpath(cand, src)
            plugin_edges[rel].add(target)
            owner = target.split(os.sep)[1] if target.startswith('plugins' + os.sep) else None
            if owner not in (None, name, 'common'):
                bad.append('%s includes %s, a private file of the %s plugin' % (rel, target, owner))
    if name == 'common':
        continue
    objects = glob.glob(os.path.join('plugins', name, '.libs', '*.o'))
    plugin_objects += len(objects)
    graph = object_calls(objects + glob.glob(os.path.join('plugins', 'common', '.libs', '*.o')))
    bad += ['call cycle in plugins/%s: %s' % (name, ', '.join(c)) for c in cycles(graph)]
bad += ['#include cycle in the plugins: ' + ' -> '.join(c) for c in cycles(plugin_edges)]
if plugin_objects < 20:
    bad.append('only %d objects read from plugins/*/.libs' % plugin_objects)
for b in bad:
    print('FAIL:', b)
print('%d sources and headers, %d objects; %d plugin folders, %d plugin objects: %s'
      % (len(files), len(libcrmm_objects), len(plugin_dirs), plugin_objects, 'loops found' if bad else 'no loop'))
sys.exit(1 if bad else 0)
PY
