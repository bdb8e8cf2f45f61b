#!/usr/bin/env python3
"""The folders' walls, checked on every build: each libaff concern includes only itself and the
concerns below it, kernels include only kernels, tools include libaff but never each other, and
every quoted include is written from the repository root so that it resolves from the tree as
written (no include path beyond the root is needed to read the code).

The order, lowest first (design.md's layout; tokenizer sits on core beside the rest):
    core < container < checkpoint < quant < model < placement < trace < gpu < runtime < serve < ui
Prints one line per breach and exits 1, or prints the edges it found and exits 0.
usage: include_walls.py REPOSITORY_ROOT
"""
import os
import re
import sys

ORDER = "core container checkpoint quant model placement trace gpu runtime serve ui".split()
RANK = {c: i for i, c in enumerate(ORDER)}
RANK["tokenizer"] = RANK["core"] + 0.5  # on core, below everything else that may use it
SOURCES = (".hpp", ".cpp", ".hip", ".cu", ".h")
QUOTED = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def quoted_includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = QUOTED.match(line)
            if m:
                yield number, m.group(1)


def sources(root, folder):
    for base, _, files in os.walk(os.path.join(root, folder)):
        for name in sorted(files):
            if name.endswith(SOURCES):
                yield os.path.join(base, name)


def main(root):
    breaches, edges = [], set()
    for path in sources(root, "libaff"):
        rel = os.path.relpath(path, root)
        concern = rel.split(os.sep)[1]
        if concern not in RANK:
            breaches.append(f"{rel}: concern '{concern}' has no place in the order")
            continue
        for number, inc in quoted_includes(path):
            parts = inc.split("/")
            if parts[0] == "kernels":
                if concern != "gpu":
                    breaches.append(f"{rel}:{number}: {concern} includes \"{inc}\": only gpu reaches the kernels")
                elif not os.path.isfile(os.path.join(root, inc)):
                    breaches.append(f"{rel}:{number}: \"{inc}\" does not exist in the tree")
                edges.add(("gpu", "kernels"))
                continue
            if parts[0] != "libaff" or len(parts) < 3:
                breaches.append(f"{rel}:{number}: \"{inc}\" is not written from the repository root (libaff/<concern>/...)")
                continue
            target = parts[1]
            if target not in RANK:
                breaches.append(f"{rel}:{number}: \"{inc}\" names no concern of the order")
            elif RANK[target] > RANK[concern]:
                breaches.append(f"{rel}:{number}: {concern} includes {target}, which lies above it")
            else:
                edges.add((concern, target))
            if not os.path.isfile(os.path.join(root, inc)):
                breaches.append(f"{rel}:{number}: \"{inc}\" does not exist in the tree")
    for path in sources(root, "kernels"):
        rel = os.path.relpath(path, root)
        for number, inc in quoted_includes(path):
            # Within kernels/ a bare name resolves beside the including file, as written.
            target = inc if inc.startswith("kernels/") else os.path.join("kernels", inc)
            if not inc.startswith("kernels/") and "/" in inc:
                breaches.append(f"{rel}:{number}: a kernel includes \"{inc}\" outside kernels/")
            elif not os.path.isfile(os.path.join(root, target)):
                breaches.append(f"{rel}:{number}: \"{inc}\" does not exist in kernels/")
    for path in sources(root, "tools"):
        rel = os.path.relpath(path, root)
        for number, inc in quoted_includes(path):
            if not inc.startswith("libaff/") or not os.path.isfile(os.path.join(root, inc)):
                breaches.append(f"{rel}:{number}: \"{inc}\" is not a libaff header written from the root")
    for b in breaches:
        print(b)
    if breaches:
        return 1
    for a, b in sorted(edges, key=lambda e: (RANK.get(e[0], 99), str(e[1]))):
        if a != b:
            print(f"{a} -> {b}")
    print(f"include_walls: {len(edges)} edges, all downwards")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: include_walls.py REPOSITORY_ROOT")
    sys.exit(main(sys.argv[1]))
