#!/usr/bin/env python3
"""tools/check_layers.py on scratch trees: a tree drawn as the layers say passes; an upward
include, an include between two folders of one layer, and a folder in no layer each fail,
naming the file and line."""
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "check_layers.py")


def tree(files):
    root = tempfile.mkdtemp(prefix="layers-")
    for path, text in files.items():
        full = os.path.join(root, "compiler", path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    return root


def run(files):
    p = subprocess.run([sys.executable, CHECK, tree(files)], capture_output=True, text=True)
    return p.returncode, p.stdout


GOOD = {
    "ir/IR.h": '#include "source/Diagnostics.h"\n#include "shmap_runtime.h"\n',
    "rules/Rules.h": '#include "ir/IR.h"\n',
    "passes/ad/AD.h": '#include "rules/Rules.h"\n#include "passes/variance/Variance.h"\n',
    "passes/variance/Variance.h": '#include "ir/IR.h"\n',
    "prims/Prim.h": '#include "passes/ad/AD.h"\n#include "codegen/CodegenContext.h"\n',
    "codegen/CodegenContext.h": '#include "rules/Rules.h"\n',
}
failures = []


def expect(name, files, rc, text):
    got_rc, out = run(files)
    if got_rc != rc or text not in out:
        failures.append(f"{name}: exit {got_rc} (expected {rc}), output:\n{out}")


expect("the layers as drawn", GOOD, 0, "all down")
expect("an upward include (the rules including autodiff)",
       {**GOOD, "rules/Rules.h": '#include "ir/IR.h"\n\n#include "passes/ad/AD.h"\n'}, 1,
       "compiler/rules/Rules.h:3: rules (layer 4) includes passes/ad/AD.h")
expect("a sideways include (codegen including sema)",
       {**GOOD, "codegen/Lower.cpp": '#include "sema/Sema.h"\n'}, 1,
       "compiler/codegen/Lower.cpp:1: codegen (layer 5) includes sema/Sema.h")
expect("a folder in no layer", {**GOOD, "mystery/X.cpp": "\n"}, 1,
       "compiler/mystery/X.cpp: its folder is in no layer")
expect("an include of a folder in no layer", {**GOOD, "ir/IR.cpp": '#include "mystery/X.h"\n'}, 1,
       "compiler/ir/IR.cpp:1: includes mystery/X.h, in no layer")

for f in failures:
    print("FAIL", f)
print(f"{5 - len(failures)}/5 cases as expected")
sys.exit(1 if failures else 0)
