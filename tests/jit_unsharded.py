#!/usr/bin/env python3
"""Every jit function computes what it computes unsharded: each program in samples/
and tests/run/ with a @jit function is run twice, partitioned (as compiled) and with
--jit-whole (every jit function run whole on the host, one device, no collectives), and the two
outputs must agree: the same text, the numbers within rtol 1e-4, atol 1e-5 (partitioned sums
and products are reassociated).

    python3 tests/jit_unsharded.py --shmapc build/compiler/shmapc [PROGRAMS]"""
import argparse
import glob
import math
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan)")


def run(shmapc, program, *flags):
    p = subprocess.run([shmapc, "run", *flags, program], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("%s %s failed (%d): %s" % (program, " ".join(flags), p.returncode, p.stderr.strip()))
    return p.stdout


def differences(a, b, rtol=1e-4, atol=1e-5):
    """Where the outputs a and b disagree: their text apart from numbers, or a number."""
    if NUMBER.sub("#", a) != NUMBER.sub("#", b):
        return ["the text differs"]
    out = []
    for x, y in zip(NUMBER.findall(a), NUMBER.findall(b)):
        fx, fy = float(x), float(y)
        same = (math.isnan(fx) and math.isnan(fy)) or fx == fy or abs(fx - fy) <= atol + rtol * abs(fy)
        if not same:
            out.append("%s (partitioned) vs %s (whole)" % (x, y))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("programs", nargs="*")
    a = ap.parse_args()
    programs = a.programs or sorted(
        p for p in glob.glob(os.path.join(ROOT, "samples", "*.smp")) + glob.glob(os.path.join(ROOT, "tests", "run", "*.smp"))
        if "@jit(" in open(p).read())
    failed = 0
    for program in programs:
        name = os.path.relpath(program, ROOT)
        try:
            diffs = differences(run(a.shmapc, program), run(a.shmapc, program, "--jit-whole"))
        except RuntimeError as e:
            diffs = [str(e)]
        print("%s %s%s" % ("ok  " if not diffs else "FAIL", name, "" if not diffs else ": " + "; ".join(diffs[:5])))
        failed += bool(diffs)
    print("%d of %d jit programs differ from their unpartitioned run" % (failed, len(programs)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
