#!/usr/bin/env python3
"""Compile work linear in the program's size, checked without timing anything.

The program is bench/compile_time's chain: N element-wise statements over f32[1024], then
sum, with grad (its forward pass keeps every residual live until the backward pass: the case
that made arena planning quadratic). `shmapc compile --time-passes` prints the count of the
planning loops' steps (compiler/source/WorkCount.h); the count for 4N statements must stay
within 1.25x of 4 times the count for N. A count is the same on a loaded CI machine as on an
idle one, where a ratio of two compile times swings by more than the 2x a quadratic term
adds between these sizes. The check also shows that --time-passes names the stages.

  python3 check_compile_scaling.py --shmapc BUILD/compiler/shmapc
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

SIZES = (1000, 4000)
TOLERANCE = 1.25  # the counts' fixed parts (main, the sum) make the ratio a little under 4


def program(n, with_grad):
    lines = ["def f(x) {", "  let y = x;"]
    for i in range(n):
        lines.append("  y = y * 1.0001 + 0.5;" if i % 2 == 0 else "  y = y * y * 0.001 - y;")
    lines += ["  return sum(y);", "}", "def main() {", "  let x = iota(f32[1024]) / 1024.0;",
              '  print("f", f(x));']
    if with_grad:
        lines.append('  print("df/dx[0:4]", grad(f)(x)[0:4]);')
    return "\n".join(lines + ["}"]) + "\n"


def steps(shmapc, tmp, n, with_grad):
    src = os.path.join(tmp, "chain_%d_%d.smp" % (n, with_grad))
    with open(src, "w") as f:
        f.write(program(n, with_grad))
    r = subprocess.run([shmapc, "compile", src, "--emit=llvm", "-O0", "-o", os.devnull, "--time-passes"],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("FAIL: shmapc compile of %d statements exited %d:\n%s" % (n, r.returncode, r.stderr[-2000:]))
    for stage in ("sema", "pass differentiate", "codegen: LLVM IR emission", "LLVM optimisation pipeline"):
        if not re.search(r"^\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+%\s+" + re.escape(stage), r.stderr, re.M):
            sys.exit("FAIL: --time-passes did not report the stage '%s':\n%s" % (stage, r.stderr[-3000:]))
    m = re.search(r"^shmapc: planning steps: (\d+)$", r.stderr, re.M)
    if not m:
        sys.exit("FAIL: --time-passes printed no count of planning steps:\n" + r.stderr[-3000:])
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for with_grad in (False, True):
            small, large = (steps(a.shmapc, tmp, n, with_grad) for n in SIZES)
            growth = large / small
            bound = SIZES[1] / SIZES[0] * TOLERANCE
            verdict = "ok" if growth <= bound else "FAIL"
            ok = ok and growth <= bound
            print("%s: %s: %d planning steps for %d statements, %d for %d: x%.2f (at most x%.2f)"
                  % (verdict, "grad" if with_grad else "plain", small, SIZES[0], large, SIZES[1], growth, bound))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
