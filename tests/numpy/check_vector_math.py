#!/usr/bin/python3
"""The transcendental functions of compiled programs (exp, log, sin, cos, tanh, pow in f32 and
f64: glibc's libmvec through codegen/VectorMath.cpp) against glibc's libm, through Python's
math module, on 100,003 inputs each over the ranges docs/numerics.md names. Checked:
  - the error in units in the last place of the result's type, against libm's double result
    (rounded to f32 for f32: about the correctly rounded value), is at most the bound
    docs/numerics.md documents (BOUND_ULP below, glibc's bound for libmvec), and the largest
    error seen is printed;
  - NaN and the infinities where libm gives them;
  - every element is computed by the same routine: the inputs' last 1,003 values repeat the
    first 1,003, and the program's results for them are bit for bit the same (the last ones
    fall in the loop's scalar remainder, the first in its vector body).
Usage: check_vector_math.py --shmapc PATH"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

N, REPEAT = 100_003, 1_003
BOUND_ULP = 4  # docs/numerics.md, "Transcendental functions"

FUNCS = {  # name: (libm reference, input generator)
    "exp": (math.exp, lambda r, n: r.uniform(-80, 80, n)),
    "log": (math.log, lambda r, n: np.exp(r.uniform(-80, 80, n))),
    "sin": (math.sin, lambda r, n: np.concatenate([r.uniform(-10, 10, n // 2), r.uniform(-1e4, 1e4, n - n // 2)])),
    "cos": (math.cos, lambda r, n: np.concatenate([r.uniform(-10, 10, n // 2), r.uniform(-1e4, 1e4, n - n // 2)])),
    "tanh": (math.tanh, lambda r, n: r.uniform(-10, 10, n)),
}
SPECIAL = {"exp": [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1000.0, -1000.0],
           "log": [1.0, 0.0, -1.0, float("inf"), float("nan")],
           "sin": [0.0, -0.0, float("inf"), float("nan")],
           "cos": [0.0, float("inf"), float("nan")],
           "tanh": [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 30.0, -30.0]}


def libm(f, x):
    try:
        return f(x)
    except ValueError:  # C's answers where Python raises: log(0) = -inf; log(-1), sin(inf): NaN
        return -float("inf") if f is math.log and x == 0 else float("nan")
    except OverflowError:
        return float("inf")


def ulps(got, want, dtype):
    """|got - want| in units of the last place of `want` in dtype (inf/NaN handled apart)."""
    want_t = want.astype(dtype)
    spacing = np.spacing(np.abs(want_t)).astype(np.float64)
    spacing[spacing == 0] = np.finfo(dtype).smallest_subnormal
    return np.abs(got.astype(np.float64) - want) / spacing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    shmapc = os.path.abspath(ap.parse_args().shmapc)
    rng = np.random.default_rng(11)
    inputs = {}
    for name, (_, gen) in FUNCS.items():
        x = gen(rng, N - REPEAT - len(SPECIAL[name]))
        x = np.concatenate([SPECIAL[name], x])
        inputs[name] = np.concatenate([x, x[:REPEAT]])
    base = rng.uniform(0.01, 30, N - REPEAT)
    expo = rng.uniform(-20, 20, N - REPEAT)
    inputs["pow_base"] = np.concatenate([base, base[:REPEAT]])
    inputs["pow_exp"] = np.concatenate([expo, expo[:REPEAT]])
    lines = ['arg data: str = "in.npz";', "def main() {"]
    outs = []
    for t in ("f32", "f64"):
        for name in FUNCS:
            lines.append('  let %s_%s = %s(load(data, %s[%d], key="%s_%s"));' % (name, t, name, t, N, name, t))
            outs.append("%s_%s" % (name, t))
        lines.append('  let pow_%s = load(data, %s[%d], key="pow_base_%s") ** load(data, %s[%d], key="pow_exp_%s");'
                     % (t, t, N, t, t, N, t))
        outs.append("pow_" + t)
    lines.append('  savez("out.npz", %s);' % ", ".join("%s=%s" % (o, o) for o in outs))
    lines.append("}")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "vm.smp"), os.path.join(tmp, "vm")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        np.savez(os.path.join(tmp, "in.npz"), **{"%s_%s" % (k, t): v.astype(np.float32 if t == "f32" else np.float64)
                                                 for k, v in inputs.items() for t in ("f32", "f64")})
        for cmd in ([shmapc, "compile", src, "-o", exe], [exe]):
            r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit("FAIL: %s:\n%s" % (" ".join(cmd), r.stderr))
        got = np.load(os.path.join(tmp, "out.npz"))
        failures = 0
        np.seterr(over="ignore")  # f64 references beyond f32's range become inf, as they should
        for t, dtype in (("f32", np.float32), ("f64", np.float64)):
            for name in list(FUNCS) + ["pow"]:
                y = got["%s_%s" % (name, t)]
                if name == "pow":
                    b, e = (inputs[k].astype(dtype).astype(np.float64) for k in ("pow_base", "pow_exp"))
                    want = np.array([libm(lambda u: math.pow(*u), (p, q)) for p, q in zip(b, e)])
                else:
                    x = inputs[name].astype(dtype).astype(np.float64)
                    want = np.array([libm(FUNCS[name][0], v) for v in x])
                finite = np.isfinite(want) & (np.abs(want) < np.finfo(dtype).max)
                err = ulps(y[finite], want[finite], dtype)
                worst = float(err.max()) if err.size else 0.0
                # NaN where libm gives NaN, the same infinity where it gives one
                nan_ok = np.array_equal(np.isnan(y), np.isnan(want.astype(dtype)))
                inf = np.isinf(want.astype(dtype))
                inf_ok = np.array_equal(y[inf], want.astype(dtype)[inf])
                same = y[:REPEAT].tobytes() == y[N - REPEAT:].tobytes()
                ok = worst <= BOUND_ULP and nan_ok and inf_ok and same
                failures += not ok
                print("%s %-5s %s: max error %.2f ulp (bound %d)%s%s%s" % (
                    "ok  " if ok else "FAIL", name, t, worst, BOUND_ULP, "" if nan_ok else ", NaN differs",
                    "" if inf_ok else ", infinities differ", "" if same else ", remainder differs from vector body"))
        sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
