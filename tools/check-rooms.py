#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The rooms' floors (issue 32): inside engine/src, ui/src and storage/src no two folders include
each other's headers (an #include "x.h" resolved to the file it names, by path suffix, within the
same tree). Prints each pair with the includes that make it; exit 1 when there is one.
Usage: tools/check-rooms.py [TREE...]   (default: engine/src ui/src storage/src)"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def pairs(root):
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
    return [(a, b, edges[(a, b)], edges[(b, a)]) for (a, b) in sorted(edges) if a < b and (b, a) in edges]


def main(trees):
    status = 0
    for tree in trees:
        for a, b, ab, ba in pairs(tree):
            status = 1
            print(f"rooms: {tree}: {a}/ and {b}/ include each other:")
            for line in ab[:3] + ba[:3]:
                print(f"  {line}")
    if status == 0:
        print(f"rooms: no two folders include each other in {', '.join(trees)}")
    return status


if __name__ == "__main__":
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    sys.exit(main(sys.argv[1:] or ["engine/src", "ui/src", "storage/src"]))
