#!/usr/bin/python3
"""File-to-file call graph of src/core, from the object files' symbols.

For each object file of the core library, `nm` lists the symbols it defines
and the ones it needs; an edge a -> b means a.o uses a symbol that b.o
defines. A strongly connected component of more than one file is a call
cycle across files: the layering of docs/core.md forbids it.

usage: core_callgraph.py [--check] [--allow=a,b,..] [--dot] [--why] OBJECT_DIR_OR_FILES...
  prints the edges (caller -> callees), each file's level (0: calls no other
  core file) and every cycle; with --check exits 1 when a cycle exists;
  --why lists, for each edge, the symbols that make it; --dot prints the
  graph for Graphviz instead; --allow names files a known cycle may hold:
  --check then fails only on a cycle reaching outside them.
"""
import os
import subprocess
import sys


def object_files(args):
    objs = []
    # CMake's $<TARGET_OBJECTS:...> arrives as one ';'-separated argument.
    args = [p for a in args for p in a.split(";") if p]
    for a in args:
        if os.path.isdir(a):
            for root, _, files in os.walk(a):
                objs += [os.path.join(root, f) for f in files if f.endswith(".o")]
        else:
            objs.append(a)
    return sorted(objs)


def module(path):
    # CMake names objects "<name>.c.o".
    base = os.path.basename(path)
    for suffix in (".c.o", ".o"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def symbols(paths):
    """{path: (defined, undefined)} from one nm run over every object (one
    process, so the test stays fast on a loaded machine)."""
    out = subprocess.run(["nm", "-P", "-A"] + paths, check=True,
                         capture_output=True, text=True).stdout
    syms = {p: (set(), set()) for p in paths}
    for line in out.splitlines():
        # "<path>: <name> <kind> [value size]"
        path, sep, rest = line.partition(": ")
        parts = rest.split()
        if not sep or len(parts) < 2 or path not in syms:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            syms[path][1].add(name)
        elif kind in "TDBRVWGSC":  # global (upper case) definitions only
            syms[path][0].add(name)
    return syms


def sccs(graph):
    """Tarjan's algorithm; returns components with more than one node."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def levels(graph):
    """Longest path down to a leaf; only meaningful without cycles."""
    memo = {}

    def level(v, seen):
        if v in memo:
            return memo[v]
        if v in seen:
            return 0
        seen.add(v)
        lv = 0 if not graph[v] else 1 + max(level(w, seen) for w in graph[v])
        seen.discard(v)
        memo[v] = lv
        return lv

    return {v: level(v, set()) for v in graph}


def main(argv):
    check = "--check" in argv
    dot = "--dot" in argv
    why = "--why" in argv
    allow = set()
    for a in argv:
        if a.startswith("--allow="):
            allow |= {m for m in a[len("--allow="):].split(",") if m}
    args = [a for a in argv if not a.startswith("--")]
    objs = object_files(args)
    if not objs:
        print("core_callgraph: no object files found in", args, file=sys.stderr)
        return 2
    defs, needs = {}, {}
    owner = {}
    syms = symbols(objs)
    for o in objs:
        m = module(o)
        d, u = syms[o]
        defs[m], needs[m] = d, u
        for s in d:
            owner.setdefault(s, m)
    graph = {m: set() for m in defs}
    used = {}
    for m, u in needs.items():
        for s in u:
            callee = owner.get(s)
            if callee is not None and callee != m:
                graph[m].add(callee)
                used.setdefault((m, callee), []).append(s)
    if dot:
        print("digraph core {")
        for m in sorted(graph):
            for c in sorted(graph[m]):
                print(f'  "{m}" -> "{c}";')
        print("}")
        return 0
    cycles = sccs(graph)
    lv = levels(graph)
    print(f"# {len(graph)} files, {sum(len(v) for v in graph.values())} edges")
    for m in sorted(graph, key=lambda k: (lv[k], k)):
        print(f"L{lv[m]:<2} {m:<22} -> {' '.join(sorted(graph[m]))}")
        if why:
            for c in sorted(graph[m]):
                print(f"      {m} -> {c}: {' '.join(sorted(used[(m, c)]))}")
    if cycles:
        bad = False
        for c in cycles:
            known = set(c) <= allow
            bad = bad or not known
            print(f"CYCLE ({len(c)} files{', allowed' if known else ''}): {' '.join(c)}")
        return 1 if check and bad else 0
    print("no cycle across files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
