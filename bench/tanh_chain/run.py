#!/usr/bin/python3
"""The tanh-chain benchmark: 10 stages y = tanh(y * 1.1 + 0.1) over 2^20 f32 values,
one core (taskset -c 0), in ns per element and stage: shmapc against the same loop in C
(chain.c, gcc -O3 -march=native, or -march= --target-cpu's CPU) calling libm's scalar tanhf,
the same with -ffast-math -fopenmp-simd so that gcc calls glibc's vector tanhf (libmvec: the
target's peer), numpy and JAX jit (bench/setup.sh's venv). The target: shmapc per stage / C
with vector tanhf <= 1.5x.

    python3 bench/tanh_chain/run.py --shmapc build/compiler/shmapc [--quick] [--json PATH]

--quick: the same sizes, 5 repeats where the default is 3 (one run of each program takes well
under a second, and the quickest of more runs is steadier on a shared machine)."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common import c_march, compile_flags, PIN, Record, parse, parser, best_line, peer_output, seconds_per_step, venv_python  # noqa: E402

N, STAGES = 1 << 20, 10

PROGRAM = """arg steps: i32 = 1;
def main() {
  let y = iota(f32[%d]) / %d.0 - 0.5;
  let s = 0;
  while s < steps {
%s
    s = s + 1;
  }
  print("sum", sum(y));
}
""" % (N, N, "\n".join(["    y = tanh(y * 1.1 + 0.1);"] * STAGES))

PEERS = {
    "numpy": """import sys, time, numpy as np
y = (np.arange(%d, dtype=np.float32) / %d - 0.5).astype(np.float32)
best = 1e9
for _ in range(10):
    t0 = time.perf_counter()
    for _ in range(%d): y = np.tanh(y * np.float32(1.1) + np.float32(0.1))
    best = min(best, time.perf_counter() - t0)
print(best / %d / %d * 1e9)
""" % (N, N, STAGES, STAGES, N),
    "JAX jit": """import os, time
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
import jax, jax.numpy as jnp
def chain(y):
    for _ in range(%d): y = jnp.tanh(y * 1.1 + 0.1)
    return y
f = jax.jit(chain)
y = jnp.arange(%d, dtype=jnp.float32) / %d - 0.5
y = f(y).block_until_ready()
best = 1e9
for _ in range(10):
    t0 = time.perf_counter(); y = f(y).block_until_ready(); best = min(best, time.perf_counter() - t0)
print(best / %d / %d * 1e9)
""" % (STAGES, N, N, STAGES, N),
}


def main():
    a = parse(parser(__doc__), quick_repeats=5)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in (("C, libm tanhf", []), ("C, vector tanhf (libmvec)", ["-ffast-math", "-fopenmp-simd"])):
            exe = os.path.join(tmp, "chain%d" % len(rows))
            subprocess.run(["gcc", "-O3"] + c_march() + flags + [os.path.join(HERE, "chain.c"), "-o", exe, "-lm"],
                           check=True)
            rows.append((name, best_line(PIN + [exe, "5"], a.repeats)[0]))
        src, exe = os.path.join(tmp, "chain.smp"), os.path.join(tmp, "chain")
        with open(src, "w") as f:
            f.write(PROGRAM)
        subprocess.run([a.shmapc, "compile", src, "-o", exe] + compile_flags(), check=True)
        rows.append(("shmapc", seconds_per_step(exe, PIN, a.repeats, 1, 21) / STAGES / N * 1e9))
        ns = peer_output(PIN + ["/usr/bin/python3", "-c", PEERS["numpy"]], a.repeats)
        rows.append(("numpy" if ns else "numpy (not installed)", ns))
        py = venv_python()
        ns = peer_output(PIN + [py, "-c", PEERS["JAX jit"]], a.repeats) if py else None
        rows.append(("JAX jit" if ns else "JAX jit (not installed: bench/setup.sh)", ns))
    vec = dict(rows)["C, vector tanhf (libmvec)"]
    print("tanh chain: %d stages of y = tanh(y * 1.1 + 0.1) over %d f32, one core" % (STAGES, N))
    print("%-40s %14s %16s" % ("", "ns/element", "x C vector tanhf"))
    for name, ns in rows:
        print("%-40s %14s %16s" % (name, "%.3f" % ns if ns else "-", "%.2f" % (ns / vec) if ns else "-"))
    print()
    print("the tanh-chain target: shmapc per stage / C with vector tanhf: %.2fx (target <= 1.5x)" % (dict(rows)["shmapc"] / vec))
    rec = Record("tanh_chain", a, elements=N, stages=STAGES)
    for name, ns in rows:
        rec.row(name, ns, "ns/element", peers={"C vector tanhf": ns / vec} if ns else None)
    rec.target("tanh chain per stage / C with vector tanhf", dict(rows)["shmapc"] / vec, "<=", 1.5)
    rec.write()


if __name__ == "__main__":
    sys.exit(main())
