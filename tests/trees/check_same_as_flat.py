#!/usr/bin/python3
"""samples/transformer.smp (parameters and AdamW state as records, stdlib/optim.smp) against
tests/trees/transformer_flat.smp (the same model written with one name per parameter and per
moment, stdlib/nn.smp's adamw_step): six steps of each print the same lines, and their
checkpoints hold bit-identical arrays, leaf for name (params.attn.wq is wq, opt.mu.attn.wq is
m_wq, opt.count is steps_done). Also prints both programs' line counts (the README's figure).
Usage: check_same_as_flat.py --shmapc PATH"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREE = os.path.join(ROOT, "samples", "transformer.smp")
FLAT = os.path.join(ROOT, "tests", "trees", "transformer_flat.smp")
GROUPS = {"ln1_g": "ln1.g", "ln1_b": "ln1.b", "ln2_g": "ln2.g", "ln2_b": "ln2.b",
          "wq": "attn.wq", "wk": "attn.wk", "wv": "attn.wv", "wo": "attn.wo",
          "w1": "mlp.w1", "b1": "mlp.b1", "w2": "mlp.w2", "b2": "mlp.b2", "emb": "emb", "pos": "pos"}


def tree_key(flat):
    if flat == "steps_done":
        return "opt.count"
    for prefix, group in (("m_", "opt.mu."), ("v_", "opt.nu.")):
        if flat.startswith(prefix):
            return group + GROUPS[flat[2:]]
    return "params." + GROUPS[flat]


def run(shmapc, src, tmp, name):
    exe = os.path.join(tmp, name)
    subprocess.run([shmapc, "compile", src, "-o", exe], check=True)
    ckpt = os.path.join(tmp, name + ".npz")
    r = subprocess.run([exe, "--steps=6", "--tokens_file=" + os.path.join(ROOT, "samples", "data", "tokens.npy"),
                        "--checkpoint=" + ckpt], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit("FAIL: %s exited with %d:\n%s" % (name, r.returncode, r.stderr))
    return r.stdout, np.load(ckpt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    opts = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        tree_out, tree = run(opts.shmapc, TREE, tmp, "tree")
        flat_out, flat = run(opts.shmapc, FLAT, tmp, "flat")
        if tree_out != flat_out:
            failures += 1
            print("FAIL: the printed steps and losses differ:\n--- trees\n%s--- flat\n%s" % (tree_out, flat_out))
        if sorted(tree_key(k) for k in flat.files) != sorted(tree.files):
            failures += 1
            print("FAIL: checkpoint keys: trees %s, flat %s" % (sorted(tree.files), sorted(flat.files)))
        else:
            for k in sorted(flat.files):
                a, b = flat[k], tree[tree_key(k)]
                same = a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
                failures += not same
                print("%s %s = %s" % ("ok  " if same else "FAIL", tree_key(k), k))
    lines = {p: sum(1 for _ in open(p)) for p in (TREE, FLAT)}
    print("lines: trees %d, flat %d (%.2f)" % (lines[TREE], lines[FLAT], lines[TREE] / lines[FLAT]))
    print("tree and flat Transformer: %s" % ("the same, bit for bit" if not failures else "%d difference(s)" % failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
