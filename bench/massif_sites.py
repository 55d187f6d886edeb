#!/usr/bin/env python3
"""Live heap by allocating site in a massif snapshot (bench/massif-streams.sh).

Reads a massif file with one detailed snapshot (the last one is used) and prints the heap's total
(useful + malloc's own) and, per session + stream, the largest sites: each leaf of the allocation tree
is charged to the first frame in `binary` (the caller in bff that allocated), demangled.

Usage: massif_sites.py MASSIF_FILE COUNT [TOP]   (COUNT: sessions + streams the heap holds)
"""
import collections
import re
import subprocess
import sys


def main() -> None:
    path, count = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    lines = open(path, encoding="utf-8").read().splitlines()
    useful = extra = 0
    tree_start = None
    for i, line in enumerate(lines):
        if line.startswith("mem_heap_B="):
            useful = int(line.split("=")[1])
        elif line.startswith("mem_heap_extra_B="):
            extra = int(line.split("=")[1])
        elif line == "heap_tree=detailed":
            tree_start = i + 1
    if tree_start is None:
        sys.exit(f"massif_sites: no detailed snapshot in {path}")
    node = re.compile(r"^( *)n(\d+): (\d+) (.*)$")
    stack: list[str] = []
    sites: collections.Counter = collections.Counter()
    for line in lines[tree_start:]:
        m = node.match(line)
        if not m:
            break
        depth, children, size, frame = len(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
        stack = stack[:depth] + [frame]
        if children == 0:
            own = [f for f in stack if "(in " in f and "bff" in f.split("(in ")[-1]]
            sites[own[0] if own else stack[-1]] += size
    print(f"heap: {useful + extra} B ({useful} useful + {extra} malloc's own), {(useful + extra) / count:.0f} B per session + stream (start-up heap included)")
    chosen = sites.most_common(top)
    names = [(re.search(r"\$s\S+", k) or re.search(r"\S+$", k)).group(0) for k, _ in chosen]
    demangled = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(names),
                               capture_output=True, text=True).stdout.splitlines()
    for (frame, size), name in zip(chosen, demangled or names):
        print(f"{size / count:8.1f} B  {name[:150]}")


if __name__ == "__main__":
    main()
