#!/usr/bin/python3
"""The transcendental functions of compiled programs (exp, log, sin, cos, tanh, pow in f32 and
f64: the compiler's own, codegen/Math.h) against the x87 long double functions of glibc's libm
(through numpy's longdouble: 64-bit mantissas, so an error in f64 ulps is measured to about
0.001 ulp), on 100,003 inputs each over the ranges docs/numerics.md names. Checked:
  - the error in units in the last place of the result's type is at most the bound
    docs/numerics.md documents (BOUND_ULP below), and the largest error seen is printed;
  - NaN and the infinities where libm gives them;
  - every element is computed by the same routine: the inputs' last 1,003 values repeat the
    first 1,003, and the program's results for them are bit for bit the same (the last ones
    fall in the loop's scalar remainder, the first in its vector body).
Usage: check_math.py --shmapc PATH"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

N, REPEAT = 100_003, 1_003
# docs/numerics.md, "Transcendental functions": the bounds for f32 and f64
BOUND_ULP = {"exp": (1, 1), "log": (1, 1), "sin": (0.51, 1), "cos": (0.51, 1), "tanh": (1.5, 1.5), "pow": (0.51, 2)}

def trig_inputs(r, n):
    return np.concatenate([r.uniform(-10, 10, n // 3), r.uniform(-1e4, 1e4, n // 3),
                           r.uniform(-1e9, 1e9, n - 2 * (n // 3))])  # the last third: the rare path too


FUNCS = {  # name: (long double reference, input generator)
    "exp": (np.exp, lambda r, n: r.uniform(-80, 80, n)),
    "log": (np.log, lambda r, n: np.exp(r.uniform(-80, 80, n))),
    "sin": (np.sin, trig_inputs),
    "cos": (np.cos, trig_inputs),
    "tanh": (np.tanh, lambda r, n: r.uniform(-10, 10, n)),
}
SPECIAL = {"exp": [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1000.0, -1000.0],
           "log": [1.0, 0.0, -1.0, float("inf"), float("nan")],
           "sin": [0.0, -0.0, float("inf"), float("nan")],
           "cos": [0.0, float("inf"), float("nan")],
           "tanh": [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 30.0, -30.0]}


def reference(f, *args):
    with np.errstate(all="ignore"):
        return f(*(a.astype(np.longdouble) for a in args))


def ulps(got, want, dtype):
    """|got - want| in units in the last place of dtype at `want` (a power of two: the spacing
    of dtype's numbers in want's binade, the subnormal spacing below the normal range)."""
    info = np.finfo(dtype)
    _, e = np.frexp(np.abs(want).astype(np.float64))  # |want| in [2^(e-1), 2^e)
    ulp = np.ldexp(np.longdouble(1), np.maximum(e, info.minexp + 1) - info.nmant - 1)
    return np.abs(got.astype(np.longdouble) - want) / ulp


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
                    want = reference(np.power, *(inputs[k].astype(dtype) for k in ("pow_base", "pow_exp")))
                else:
                    want = reference(FUNCS[name][0], inputs[name].astype(dtype))
                finite = np.isfinite(want) & (np.abs(want) < np.finfo(dtype).max)
                err = ulps(y[finite], want[finite], dtype)
                worst = float(err.max()) if err.size else 0.0
                bound = BOUND_ULP[name][0 if dtype == np.float32 else 1]
                # NaN where libm gives NaN, the same infinity where it gives one
                nan_ok = np.array_equal(np.isnan(y), np.isnan(want.astype(dtype)))
                inf = np.isinf(want.astype(dtype))
                inf_ok = np.array_equal(y[inf], want.astype(dtype)[inf])
                same = y[:REPEAT].tobytes() == y[N - REPEAT:].tobytes()
                ok = worst <= bound and nan_ok and inf_ok and same
                failures += not ok
                print("%s %-5s %s: max error %.3f ulp (bound %g)%s%s%s" % (
                    "ok  " if ok else "FAIL", name, t, worst, bound, "" if nan_ok else ", NaN differs",
                    "" if inf_ok else ", infinities differ", "" if same else ", remainder differs from vector body"))
        sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
