#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The rooms' floors (issue 32): inside engine/src, ui/src and storage/src no two folders include
each other's headers (an #include "x.h" resolved to the file it names, by path suffix, within the
same tree), nor do three or more include each other round a cycle (a/ -> b/ -> c/ -> a/). Prints
each pair with the includes that make it and each longer cycle; exit 1 when there is one.
Usage: tools/check-rooms.py [TREE...]   (default: engine/src ui/src storage/src)"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def edges_of(root):
    """{(from_folder, to_folder): ["file -> included file", ...]} for folders that differ."""
    files = {}
    for d, _, names in os.walk(root):
        for n in names:
            if n.endswith((".cpp", ".h", ".cu", ".hip")):
                files.setdefault(n, []).append(os.path.relpath(os.path.join(d, n), root))
    edges = {}
    for name_list in files.values():
        for rel in name_list:
            src = os.path.dirname(rel) or "."
            with open(os.path.join(root, rel), errors="replace") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                for target in files.get(os.path.basename(inc), []):
                    if not target.endswith(inc) and os.path.dirname(inc):
                        continue
                    dst = os.path.dirname(target) or "."
                    if dst != src:
                        edges.setdefault((src, dst), []).append(f"{rel} -> {target}")
    return edges


def pairs(edges):
    return [(a, b, edges[(a, b)], edges[(b, a)]) for (a, b) in sorted(edges) if a < b and (b, a) in edges]


def cycles(edges):
    """The strongly connected sets of three or more folders (a pair is reported by pairs()), each
    with one cycle through its first folder (Tarjan's depth-first search)."""
    out = {}
    for a, b in edges:
        out.setdefault(a, set()).add(b)
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(out.get(v, ())):
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
            if len(comp) > 2:
                found.append((sorted(comp), path_through(sorted(comp), out)))

    for v in sorted(out):
        if v not in index:
            visit(v)
    return found


def path_through(comp, out):
    """The shortest cycle from comp[0] back to itself inside comp (breadth-first)."""
    inside, start = set(comp), comp[0]
    back, queue = {start: None}, [start]
    for v in queue:
        for w in sorted(out.get(v, ())):
            if w == start:
                path = [v]
                while back[path[-1]] is not None:
                    path.append(back[path[-1]])
                return list(reversed(path)) + [start]
            if w in inside and w not in back:
                back[w] = v
                queue.append(w)
    return [start, start]  # not reached: every member of a strongly connected set is on a cycle


def main(trees):
    status = 0
    for tree in trees:
        edges = edges_of(tree)
        for a, b, ab, ba in pairs(edges):
            status = 1
            print(f"rooms: {tree}: {a}/ and {b}/ include each other:")
            for line in ab[:3] + ba[:3]:
                print(f"  {line}")
        for members, cycle in cycles(edges):
            status = 1
            print(f"rooms: {tree}: {', '.join(m + '/' for m in members)} include each other round a cycle,"
                  f" e.g. {' -> '.join(c + '/' for c in cycle)}:")
            for a, b in zip(cycle, cycle[1:]):
                for line in edges.get((a, b), [])[:1]:
                    print(f"  {line}")
    if status == 0:
        print(f"rooms: no folders include each other in {', '.join(trees)}")
    return status


if __name__ == "__main__":
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    sys.exit(main(sys.argv[1:] or ["engine/src", "ui/src", "storage/src"]))
