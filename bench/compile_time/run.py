#!/usr/bin/python3
"""The compile-time benchmark: a chain of 10,000 element-wise statements over f32[1024]
(alternately y = y * c_i + 0.5 and y = y * y * 0.001 - y, then sum; c_i = 1 + (i % 1000 + 1) 2^-20,
so that no two stretches of the chain are the same code, which the compiler would compile
once, as a model's identical layers), compiled by shmapc to
an executable without and with grad, against JAX compiling the same function with jax.jit,
without and with jax.grad (lowering and XLA compilation, from bench/setup.sh's venv when it
exists). Prints seconds (the best of --repeats) and the ratio grad / without, whose target is
<= 5x.

    python3 bench/compile_time/run.py --shmapc build/compiler/shmapc [--statements 10000]

--scaling: whether compile time grows linearly with the program. For 1k, 2k, 5k, 10k and 20k
statements, plain and with grad, the CPU seconds of `shmapc compile` (the compiler's own,
from the kernel's accounting of the finished child: unlike wall time, not inflated by other
work on a shared machine), less those of the 0-statement chain (start-up, main, linking),
per statement. PASS when the 20k chain's time per statement is at most 1.3x that of the
reference: the smallest chain whose time beyond the 0-statement chain's is at least 0.2 s (1k
statements take only some 60 ms more than none without grad, a difference that the noise of
starting a process, some milliseconds, moves by 10% and more; 5k there, 1k under grad).
Linear compile time keeps the two equal up to that noise and cache effects (more of a large
program's IR misses the caches: some 10-20% at 20k), while a quadratic term that is a third
of the reference's time per statement makes the 20k one 2x (5k reference) to 7x (1k). JAX (jax.jit, lowering and
XLA compilation, with and without jax.grad) at the sizes up to --jax-max-statements (its
grad of 5,000 statements takes some 20 s here, and grows faster).

    python3 bench/compile_time/run.py --scaling [--sizes 1000,2000,5000,10000,20000]

Then the whole compile's CPU time at 1,000 and 20,000 statements, plain, under grad, and as
a shmap's body under grad (a forward and a backward shmap passing thousands of residuals), whose
ratio (linear: 20x and a little less for start-up) has the target <= 25x; the 10k chain's
compile against JAX jit's has the target <= 0.5x, plain and under grad.

--quick: the same sizes, one repeat.
--json PATH: a record of the rows and the target (bench/run_all.py)."""
import inspect
import os
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import compile_flags, ENV, Record, best_line, parse, parser, peer_output, venv_python, wall  # noqa: E402,F401


def scale(i):
    """Statement i's factor: exact in f32, a different one for each of 1000 statements."""
    return 1 + (i % 1000 + 1) * 2.0 ** -20


def chain(n):
    lines = ["def f(x) {", "  let y = x;"]
    for i in range(n):
        lines.append("  y = y * %r + 0.5;" % scale(i) if i % 2 == 0 else "  y = y * y * 0.001 - y;")
    return lines + ["  return sum(y);", "}"]


def program(n, with_grad, in_shmap=False):
    """The chain as a function of f32[1024]; in_shmap: as a shmap's body on a mesh of 2 (each
    device half the array, the sum a psum), whose vjp is a forward shmap that returns its
    residuals and a backward one that reads them (thousands of each)."""
    lines = chain(n)
    if in_shmap:
        lines = (['mesh m = <["i"=2]>;', '@shmap(mesh=m, in_specs=(P("i"),), out_specs=P())',
                  "def f(x: f32[512]) -> f32[] {"] + lines[1:-2] + ['  return psum(sum(y), "i");', "}"])
    main = ["def main() {", "  let x = iota(f32[1024]) / 1024.0;", '  print("f", f(x));']
    if with_grad:
        main.append('  print("df/dx[0:4]", grad(f)(x)[0:4]);')
    return "\n".join(lines + main + ["}"]) + "\n"


# (the chain's factors from scale() itself, so that both programs are the same chain)
JAX_SCRIPT = inspect.getsource(scale) + r'''
import sys, time
import jax, jax.numpy as jnp
n, with_grad = int(sys.argv[1]), sys.argv[2] == "1"
def f(x):
    y = x
    for i in range(n):
        y = y * scale(i) + 0.5 if i % 2 == 0 else y * y * 0.001 - y
    return jnp.sum(y)
g = jax.grad(f) if with_grad else f
x = jnp.arange(1024, dtype=jnp.float32) / 1024
t0 = time.perf_counter()
jax.jit(g).lower(x).compile()
print("%.4f" % (time.perf_counter() - t0))
'''


def cpu_seconds(cmd):
    """The user + system CPU seconds of one run of cmd (its output discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# The default run's growth target: the whole compile of the largest chain over the smallest's
# (linear with start-up costs: a little under 20x; the target allows 25x).
GROWTH_SIZES = (1000, 20000)
GROWTH_CASES = ("without grad", "under grad", "in a shmap, under grad")
SCALING_TOLERANCE = 1.3  # see the module's docstring
MIN_REFERENCE_SECONDS = 0.2  # the reference size's CPU time beyond the 0-statement chain's


def scaling(a):
    sizes = [int(v) for v in a.sizes.split(",")]
    py = venv_python() if a.jax_max_statements > 0 else None
    per = {}  # (with_grad, n) -> CPU seconds per statement, beyond the 0-statement chain's
    print("compile time per statement of a chain of N element-wise statements over f32[1024] "
          "(CPU microseconds, best of %d, less the 0-statement chain's)" % a.repeats)
    print("%-8s %-6s %10s %12s %12s %14s" % ("N", "grad", "shmapc s", "shmapc us/eq", "vs first", "JAX jit us/eq"))
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "jax_compile.py")
        with open(script, "w") as f:
            f.write(JAX_SCRIPT)

        def shmapc_seconds(n, g):
            src = os.path.join(tmp, "chain%d_%d.smp" % (n, g))
            with open(src, "w") as f:
                f.write(program(n, g))
            return min(cpu_seconds([a.shmapc, "compile", src, "-o", os.path.join(tmp, "chain")] + compile_flags())
                       for _ in range(a.repeats))

        def jax_seconds(n, g):
            if not py or n > a.jax_max_statements:
                return None
            try:
                return best_line([py, script, str(n), "1" if g else "0"], 1)[0]
            except subprocess.CalledProcessError:
                return None

        for g in (False, True):
            base = shmapc_seconds(0, g)
            jax_base = jax_seconds(0, g)
            for n in sizes:
                t = shmapc_seconds(n, g)
                per[(g, n)] = (t - base) / n
                j = jax_seconds(n, g)
                jax = "%14.1f" % ((j - jax_base) / n * 1e6) if j is not None and jax_base is not None else "%14s" % "-"
                print("%-8d %-6s %10.2f %12.1f %11.2fx %s" % (n, "yes" if g else "no", t, per[(g, n)] * 1e6,
                                                              per[(g, n)] / per[(g, sizes[0])], jax), flush=True)
    ok = True
    for g in (False, True):
        ref = next((n for n in sizes if per[(g, n)] * n >= MIN_REFERENCE_SECONDS), sizes[0])
        growth = per[(g, sizes[-1])] / per[(g, ref)]
        good = growth <= SCALING_TOLERANCE
        ok = ok and good
        print("%s: %s: time per statement at %d is %.2fx that at %d (at most %.1fx)"
              % ("PASS" if good else "FAIL", "grad" if g else "plain", sizes[-1], growth, ref, SCALING_TOLERANCE))
    return 0 if ok else 1


def main():
    ap = parser(__doc__)
    ap.add_argument("--statements", type=int, default=10000)
    ap.add_argument("--scaling", action="store_true", help="time per statement at several sizes, PASS/FAIL")
    ap.add_argument("--sizes", default="1000,2000,5000,10000,20000")
    ap.add_argument("--jax-max-statements", type=int, default=5000,
                    help="--scaling: compile with JAX only up to this size (0: never)")
    a = parse(ap, quick_repeats=1)
    if a.scaling:
        return scaling(a)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for g in (False, True):
            src = os.path.join(tmp, "chain%d.smp" % g)
            with open(src, "w") as f:
                f.write(program(a.statements, g))
            rows[("shmapc", g)] = min(wall([a.shmapc, "compile", src, "-o", os.path.join(tmp, "chain")] + compile_flags())
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
    # Growth from the smallest to the largest chain, the whole compile (start-up included, as a
    # user waits for it), in CPU seconds so that other work on a shared machine does not move it.
    growth = {}
    with tempfile.TemporaryDirectory() as tmp:
        for g_ in GROWTH_CASES:
            t = {}
            for n in GROWTH_SIZES:
                src = os.path.join(tmp, "chain%d_%s.smp" % (n, g_))
                with open(src, "w") as f:
                    f.write(program(n, g_ != "without grad", in_shmap=g_ == "in a shmap, under grad"))
                t[n] = min(cpu_seconds([a.shmapc, "compile", src, "-o", os.path.join(tmp, "chain")] + compile_flags())
                           for _ in range(a.repeats))
            growth[g_] = t
    print()
    print("compile time (CPU seconds, best of %d) of %d and %d statements and their ratio"
          % (a.repeats, GROWTH_SIZES[0], GROWTH_SIZES[1]))
    for g_ in GROWTH_CASES:
        t = growth[g_]
        print("%-10s %-24s %8.2f %8.2f %8.2fx" % ("shmapc", g_, t[GROWTH_SIZES[0]],
                                                 t[GROWTH_SIZES[1]], t[GROWTH_SIZES[1]] / t[GROWTH_SIZES[0]]))
    print()
    print("the compile-time target: compile of 10k equations under grad / without: %.2fx (target <= 5x)" % (g / p))
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
    for grad in (False, True):
        jax = rows[("JAX jit", grad)]
        rec.target("compile of %d statements %s / JAX jit" % (a.statements, "under grad" if grad else "without grad"),
                   rows[("shmapc", grad)] / jax if jax else None, "<=", 0.5)
    for case in GROWTH_CASES:
        t = growth[case]
        rec.target("compile time, %d / %d statements, %s" % (GROWTH_SIZES[1], GROWTH_SIZES[0], case),
                   t[GROWTH_SIZES[1]] / t[GROWTH_SIZES[0]], "<=", 25.0,
                   note="linear: 20x, CPU seconds of the whole compile")
    rec.write()


if __name__ == "__main__":
    sys.exit(main())
