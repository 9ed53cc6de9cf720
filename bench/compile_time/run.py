#!/usr/bin/python3
"""Issue 11's compile-time benchmark: a chain of 10,000 element-wise statements over f32[1024]
(alternately y = y * 1.0001 + 0.5 and y = y * y * 0.001 - y, then sum), compiled by shmapc to
an executable without and with grad, against JAX compiling the same function with jax.jit,
without and with jax.grad (lowering and XLA compilation, from bench/setup.sh's venv when it
exists). Prints seconds (the best of --repeats) and the ratio grad / without, whose target is
<= 5x.

    python3 bench/compile_time/run.py --shmapc build/compiler/shmapc [--statements 10000]

--quick: the same 10,000 statements (the target's size), one repeat.
--json PATH: a record of the rows and the target (bench/run_all.py)."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import Record, parse, parser, peer_output, venv_python, wall  # noqa: E402


def chain(n):
    lines = ["def f(x) {", "  let y = x;"]
    for i in range(n):
        lines.append("  y = y * 1.0001 + 0.5;" if i % 2 == 0 else "  y = y * y * 0.001 - y;")
    return lines + ["  return sum(y);", "}"]


def program(n, with_grad):
    main = ["def main() {", "  let x = iota(f32[1024]) / 1024.0;", '  print("f", f(x));']
    if with_grad:
        main.append('  print("df/dx[0:4]", grad(f)(x)[0:4]);')
    return "\n".join(chain(n) + main + ["}"]) + "\n"


JAX_SCRIPT = r'''
import sys, time
import jax, jax.numpy as jnp
n, with_grad = int(sys.argv[1]), sys.argv[2] == "1"
def f(x):
    y = x
    for i in range(n):
        y = y * 1.0001 + 0.5 if i % 2 == 0 else y * y * 0.001 - y
    return jnp.sum(y)
g = jax.grad(f) if with_grad else f
x = jnp.arange(1024, dtype=jnp.float32) / 1024
t0 = time.perf_counter()
jax.jit(g).lower(x).compile()
print("%.4f" % (time.perf_counter() - t0))
'''


def main():
    ap = parser(__doc__)
    ap.add_argument("--statements", type=int, default=10000)
    a = parse(ap, quick_repeats=1)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for g in (False, True):
            src = os.path.join(tmp, "chain%d.smp" % g)
            with open(src, "w") as f:
                f.write(program(a.statements, g))
            rows[("shmapc", g)] = min(wall([a.shmapc, "compile", src, "-o", os.path.join(tmp, "chain")])
                                      for _ in range(a.repeats))
        py = venv_python()
        script = os.path.join(tmp, "jax_compile.py")
        with open(script, "w") as f:
            f.write(JAX_SCRIPT)
        for g in (False, True):
            rows[("JAX jit", g)] = (peer_output([py, script, str(a.statements), "1" if g else "0"], a.repeats)
                                    if py else None)
    print("compile time of a chain of %d element-wise statements over f32[1024] (seconds, best of %d)"
          % (a.statements, a.repeats))
    print("%-10s %12s %12s %12s" % ("", "without", "with grad", "grad/without"))
    for who in ("shmapc", "JAX jit"):
        p, g = rows[(who, False)], rows[(who, True)]
        if p is None or g is None:
            print("%-10s %12s" % (who, "- (not installed: bench/setup.sh)"))
        else:
            print("%-10s %12.2f %12.2f %11.2fx" % (who, p, g, g / p))
    p, g = rows[("shmapc", False)], rows[("shmapc", True)]
    print()
    print("issue 11's target: compile of 10k equations under grad / without: %.2fx (target <= 5x)" % (g / p))
    rec = Record("compile_time", a, statements=a.statements)
    for who in ("shmapc", "JAX jit"):
        for grad in (False, True):
            v = rows[(who, grad)]
            jax = rows[("JAX jit", grad)]
            rec.row("%s, %s" % (who, "with grad" if grad else "without grad"), v, "s",
                    peers={"JAX jit": v / jax} if who == "shmapc" and jax else None)
    rec.target("compile of %d statements under grad / without" % a.statements, g / p, "<=", 5.0,
               note="JAX jit: %.2fx" % (rows[("JAX jit", True)] / rows[("JAX jit", False)])
               if rows[("JAX jit", True)] and rows[("JAX jit", False)] else None)
    rec.write()


if __name__ == "__main__":
    sys.exit(main())
