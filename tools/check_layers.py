#!/usr/bin/env python3
"""Checks that compiler/'s folders form the layered DAG docs/architecture.md draws: every
#include "folder/..." of a file in compiler/ names its own folder or one of a lower layer.

An include of a folder in the same layer or a higher one (an upward arrow, and so a possible
cycle) fails, naming the file and line. A folder not in LAYERS fails too, so a new folder
takes its place in the picture when it is made. Headers without a folder ("shmap_runtime.h")
are the runtime's ABI (runtime/abi/, the compiler's only include path into the runtime).

Usage: check_layers.py [REPO]   (exit 0: the graph is a DAG as drawn; 1: the arrows that are not)
"""
import os
import re
import sys

# Lowest first. A folder may include its own files and those of any folder in a lower layer.
LAYERS = [
    ["source"],                      # files, locations, registered diagnostics
    ["lexer", "ast"],
    ["parser"],
    ["ir"],                          # the IR: data structures, Primitives.def, printer, verifier
    ["rules", "forms"],              # what a primitive is asked (Rules), rulesOf, makeEqn; how host values are kept
    # the interpreters of the rules
    ["sema", "passes/inline", "passes/variance", "codegen", "comm"],
    ["passes/ad", "passes/jit", "passes/reductions", "passes/placement", "passes/pipeline"],
    ["passes", "prims"],             # the pipeline; the primitives' definitions
    ["driver"],
]
RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    """The deepest folder of LAYERS holding `path` (relative to compiler/), or None."""
    parts = path.split("/")[:-1]
    while parts:
        name = "/".join(parts)
        if name in RANK:
            return name
        parts.pop()
    return None


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.join(repo, "compiler")
    problems = []
    arrows = set()
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith((".h", ".cpp", ".def")):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            here = folder_of(rel)
            if here is None:
                problems.append(f"compiler/{rel}: its folder is in no layer of tools/check_layers.py")
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or "/" not in m.group(1):
                        continue
                    there = folder_of(m.group(1))
                    if there is None:
                        problems.append(f"compiler/{rel}:{lineno}: includes {m.group(1)}, in no layer")
                    elif there != here:
                        arrows.add((here, there))
                        if RANK[there] >= RANK[here]:
                            problems.append(f"compiler/{rel}:{lineno}: {here} (layer {RANK[here]}) includes "
                                            f"{m.group(1)} ({there}, layer {RANK[there]}): an arrow that is not down")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) break the layers (docs/architecture.md, 'The layers')")
        return 1
    print(f"compiler/: {len(RANK)} folders in {len(LAYERS)} layers, {len(arrows)} folder arrows, all down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
