#!/usr/bin/python3
"""The training samples save their parameters (and optimizer state) to an .npz checkpoint and
continue from it with --resume=true: samples/transformer.smp (AdamW), samples/moe.smp and
samples/collective_matmuls.smp (SGD). Checked here for one of them: three steps, then three
more resumed from the checkpoint, print exactly the step numbers and losses of six
uninterrupted steps (to the last printed digit), and the two runs' final checkpoints hold
bit-identical arrays (read with numpy). Usage: check_resume.py --shmapc PATH --sample NAME"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# sample: (the labels of its per-step lines, the number of arrays in its checkpoint, the name
# of its step counter there)
SAMPLES = {"transformer": (("step:", "loss:"), 43, "opt.count"),
           "moe": (("step:", "train loss:"), 4, "steps_done"),
           "collective_matmuls": (("step:", "train loss:"), 3, "steps_done")}


def run(exe, cwd, labels, *args):
    r = subprocess.run([exe] + list(args), capture_output=True, text=True, timeout=300, cwd=cwd)
    if r.returncode != 0:
        sys.exit("FAIL: %s %s exited with %d:\n%s" % (exe, " ".join(args), r.returncode, r.stderr))
    return [line for line in r.stdout.splitlines() if line.startswith(labels)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("--sample", required=True, choices=sorted(SAMPLES))
    opts = ap.parse_args()
    labels, arrays, counter = SAMPLES[opts.sample]
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, opts.sample)
        c = subprocess.run([opts.shmapc, "compile", os.path.join(ROOT, "samples", opts.sample + ".smp"), "-o", exe],
                           capture_output=True, text=True)
        if c.returncode != 0:
            sys.exit("FAIL: compile:\n" + c.stderr)
        os.symlink(os.path.join(ROOT, "samples", "data"), os.path.join(tmp, "data"))
        straight = run(exe, tmp, labels, "--steps=6", "--checkpoint=straight.npz")
        first = run(exe, tmp, labels, "--steps=3", "--checkpoint=resumed.npz")
        second = run(exe, tmp, labels, "--steps=3", "--resume=true", "--checkpoint=resumed.npz")
        if first + second != straight or len(straight) != 12:
            sys.exit("FAIL: 3 + 3 resumed steps print\n  %s\nbut 6 straight steps print\n  %s" % (
                "\n  ".join(first + second), "\n  ".join(straight)))
        a = np.load(os.path.join(tmp, "straight.npz"))
        b = np.load(os.path.join(tmp, "resumed.npz"))
        if sorted(a.files) != sorted(b.files) or len(a.files) != arrays:
            sys.exit("FAIL: the checkpoints hold %s and %s" % (sorted(a.files), sorted(b.files)))
        for k in a.files:
            if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape or a[k].tobytes() != b[k].tobytes():
                sys.exit("FAIL: checkpoint array %s differs after resuming" % k)
        if int(a[counter]) != 6:
            sys.exit("FAIL: %s is %s, not 6" % (counter, a[counter]))
    print("ok: %s: 3 + 3 resumed steps = 6 straight steps (losses and all %d checkpoint arrays)" % (
        opts.sample, arrays))


if __name__ == "__main__":
    main()
