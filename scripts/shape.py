#!/usr/bin/env python3
"""The shape of the code: the largest files, the files over a line bound, and the import
circles between each crate's top-level modules (with the paths that tie each).

A crate's top-level module is a file or directory directly under its src/. Module A uses B when
a file of A names `crate::B` (in a `use` or inline) or, from A's own top-level file, `super::B`
would not apply (top-level files' `super` is the crate root, which is not a module here). A
circle is a set of modules each reachable from every other (a strongly connected component of
more than one module).

    scripts/shape.py            # the whole report
    scripts/shape.py --limit 800
"""

import argparse
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
USE = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
COMMENT = re.compile(r"//.*?$", re.M)


def rust_files(directory):
    for base, _, files in os.walk(directory):
        for name in sorted(files):
            if name.endswith(".rs"):
                yield os.path.join(base, name)


def lines(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def top_module(src, path):
    rel = os.path.relpath(path, src)
    first = rel.split(os.sep)[0]
    if first in ("lib.rs", "main.rs"):
        return None
    return first[:-3] if first.endswith(".rs") else first


def crate_graph(src):
    """Edges between top-level modules, each with the files that make it."""
    modules = set()
    for path in rust_files(src):
        module = top_module(src, path)
        if module:
            modules.add(module)
    edges = defaultdict(set)
    for path in rust_files(src):
        module = top_module(src, path)
        if not module:
            continue
        with open(path, encoding="utf-8") as f:
            text = COMMENT.sub("", f.read())
        # Inline test modules count too: a circle through tests is still a circle.
        for target in USE.findall(text):
            if target != module and target in modules:
                edges[(module, target)].add(os.path.relpath(path, ROOT))
    return modules, edges


def circles(modules, edges):
    """Strongly connected components with more than one module (Tarjan)."""
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(modules):
        if v not in index:
            visit(v)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=800)
    parser.add_argument("--largest", type=int, default=10)
    args = parser.parse_args()

    crates_dir = os.path.join(ROOT, "crates")
    sizes = []
    for path in rust_files(crates_dir):
        if "/target/" in path:
            continue
        sizes.append((lines(path), os.path.relpath(path, ROOT)))
    sizes.sort(reverse=True)
    print(f"files: {len(sizes)}, lines: {sum(n for n, _ in sizes)}")
    print(f"largest {args.largest}:")
    for n, path in sizes[: args.largest]:
        print(f"  {n:6} {path}")
    over = [(n, p) for n, p in sizes if n > args.limit]
    print(f"over {args.limit} lines: {len(over)}")
    for n, path in over:
        print(f"  {n:6} {path}")

    total = 0
    print("import circles between top-level modules:")
    for crate in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, crate, "src")
        if not os.path.isdir(src):
            continue
        modules, edges = crate_graph(src)
        for component in circles(modules, edges):
            total += 1
            print(f"  {crate}: {' <-> '.join(component)}")
            members = set(component)
            for (a, b), files in sorted(edges.items()):
                if a in members and b in members:
                    print(f"      {a} -> {b}: {', '.join(sorted(files))}")
    print(f"circles: {total}")


if __name__ == "__main__":
    main()
