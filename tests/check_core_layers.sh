#!/bin/sh
# check_core_layers.sh — the source folders form layers and no folder has a loop. The layers,
# lowest first: the core (include/crmm, then libcrmm), support, plugins/common, each plugin
# (plugins/NAME with its include/ folder), bench, tools. The check fails on
#   - an #include of a file in a folder above the includer's or beside it (another plugin),
#   - an #include cycle among the files of one folder,
#   - a call cycle between the objects of one folder (file A calls a function defined in B and B
#     one defined in A, directly or around a longer ring), read from `nm` of the built objects,
#   - a call from an object to a function that only a folder above or beside it defines.
# Skips (77) without python3 or nm. Run by `make check` like check_exports.sh.

here=$(cd "$(dirname "$0")" && pwd)
srcdir=$(cd "${CRMM_TEST_SRCDIR:-$here}/.." && pwd)
command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
ls libcrmm/.libs/*.o >/dev/null 2>&1 || { echo "FAIL: no libcrmm/.libs/*.o in $(pwd)"; exit 1; }
exec python3 - "$srcdir" <<'PY'
import collections, glob, os, re, subprocess, sys
src = sys.argv[1]
bad = []

def folder_of(rel):
    """The folder a source file belongs to: plugins/NAME for a plugin's files and its include/."""
    parts = rel.split(os.sep)
    if parts[0] == 'plugins':
        return 'plugins/' + parts[1]
    return 'core' if parts[0] in ('include', 'libcrmm') else parts[0]

def rank(folder):
    if folder == 'core':
        return 0
    if folder == 'plugins/common':
        return 2
    if folder.startswith('plugins/'):
        return 3
    return {'support': 1, 'bench': 4, 'tools': 5}[folder]

# ---- includes -------------------------------------------------------------------------------
files = []
for pattern in ('include/crmm/*.h', 'libcrmm/*.[ch]', 'support/*.[ch]', 'plugins/*/*.[ch]',
                'plugins/*/include/crmm/*.h', 'bench/*.[ch]', 'tools/*.[ch]'):
    files += sorted(glob.glob(os.path.join(src, pattern)))
search = [os.path.join(src, d) for d in ['include', 'support', 'bench']] + \
    sorted(glob.glob(os.path.join(src, 'plugins', '*', 'include')))
include_edges = collections.defaultdict(lambda: collections.defaultdict(set))  # folder -> file -> files
for f in files:
    rel = os.path.relpath(f, src)
    here_folder = folder_of(rel)
    for m in re.finditer(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', open(f).read(), re.M):
        dirs = ([os.path.dirname(f)] if m.group(1) == '"' else []) + search
        for d in dirs:
            cand = os.path.join(d, m.group(2))
            if not os.path.exists(cand):
                continue
            cand = os.path.relpath(os.path.realpath(cand), src)
            there = folder_of(cand)
            if there == here_folder:
                include_edges[here_folder][rel].add(cand)
            elif rank(there) >= rank(here_folder):
                bad.append('%s includes %s, of a folder %s it' % (rel, cand,
                           'beside' if rank(there) == rank(here_folder) else 'above'))
            break

# ---- calls ------------------------------------------------------------------------------------
# The objects of each folder's libraries and programs (libtool's .libs/TARGET_la-FILE.o, a
# program's FOLDER/TARGET-FILE.o); objects the tests compile from these sources are left out.
objects = collections.defaultdict(list)
for o in glob.glob('*/.libs/*-*.o') + glob.glob('*/*-*.o') + \
         glob.glob('plugins/*/.libs/*-*.o') + glob.glob('plugins/*/*-*.o'):
    target = os.path.basename(o).split('-', 1)[0]
    if target.startswith('tests_') or target.startswith('check_'):
        continue
    d = os.path.dirname(o)
    d = os.path.dirname(d) if os.path.basename(d) == '.libs' else d
    if d.split(os.sep)[0] in ('tests', 'fuzz', 'python'):
        continue
    objects[folder_of(d + os.sep + 'x')].append(o)
defined = collections.defaultdict(dict)  # folder -> symbol -> module
used = collections.defaultdict(lambda: collections.defaultdict(set))  # folder -> module -> symbols
for folder, objs in objects.items():
    for o in objs:
        mod = os.path.basename(o).split('-', 1)[1][:-2]
        for line in subprocess.run(['nm', o], capture_output=True, text=True).stdout.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in 'TDBR':
                defined[folder][p[2]] = mod
            elif len(p) == 2 and p[0] == 'U':
                used[folder][mod].add(p[1])
call_edges = collections.defaultdict(lambda: collections.defaultdict(set))
for folder, mods in used.items():
    for mod, names in mods.items():
        for n in names:
            if n in defined[folder]:
                if defined[folder][n] != mod:
                    call_edges[folder][mod].add(defined[folder][n])
                continue
            if any(n in defined[g] for g in defined if rank(g) < rank(folder)):
                continue
            others = sorted(g for g in defined if n in defined[g])
            if others:
                bad.append('%s (%s) calls %s, defined only in %s' % (mod, folder, n, ', '.join(others)))

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

for folder in sorted(include_edges):
    bad += ['#include cycle in %s: %s' % (folder, ' -> '.join(c)) for c in cycles(include_edges[folder])]
for folder in sorted(call_edges):
    bad += ['call cycle between objects of %s: %s' % (folder, ', '.join(c)) for c in cycles(call_edges[folder])]
# every folder with C sources was read from its objects
for folder in sorted(set(folder_of(os.path.relpath(f, src)) for f in files if f.endswith('.c'))):
    if folder != 'plugins/template' and not defined.get(folder):
        bad.append('no objects of %s read (was it built?)' % folder)
if len(set(defined['core'].values())) < 10:
    bad.append('only %d objects of libcrmm read' % len(set(defined['core'].values())))
for b in bad:
    print('FAIL:', b)
nobj = sum(len(set(d.values())) for d in defined.values())
print('%d sources and headers in %d folders, %d objects: %s' % (len(files), len(set(map(lambda f: folder_of(os.path.relpath(f, src)), files))),
      nobj, 'loops or upward includes found' if bad else 'no loop, no upward include'))
sys.exit(1 if bad else 0)
PY
