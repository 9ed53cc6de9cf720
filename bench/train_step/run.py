#!/usr/bin/python3
"""Issue 11's training-step benchmark: the data-parallel MLP step (batch 256, 512 -> 1024 ->
ReLU -> 512, MSE, SGD) compiled by shmapc on meshes of 1 and 2 devices, against peers timed in
the same run: the same math in C on the same OpenBLAS (and its five sgemm calls alone: the
compute bound), numpy, and JAX jit and PyTorch when their virtual environment has them. One
BLAS thread everywhere. Prints ms per step and ratios; the quietest of several runs counts.

    python3 bench/train_step/run.py --shmapc build/compiler/shmapc [--repeats 3]

A shmapc program's time per step is measured from the outside: (time of S2 steps - time of S1
steps) / (S2 - S1), which leaves out start-up and compilation."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")

PROGRAM = """arg steps: i32 = 10;
mesh m = <["data"={n}]>;

@shmap(mesh=m, in_specs=(P(), P(), P(), P(), P("data"), P("data")), out_specs=P())
def loss(w1: f32[512, 1024], b1: f32[1024], w2: f32[1024, 512], b2: f32[512],
         x: f32[{rows}, 512], y: f32[{rows}, 512]) -> f32[] {{
  let h = maximum(x @ w1 + b1, 0.0);
  let d = h @ w2 + b2 - y;
  return pmean(mean(d * d), "data");
}}

def main() {{
  let x = random_normal(f32[256, 512], seed=1);
  let y = random_normal(f32[256, 512], seed=2);
  let w1 = random_normal(f32[512, 1024], seed=3) * 0.05;
  let b1 = zeros(f32[1024]);
  let w2 = random_normal(f32[1024, 512], seed=4) * 0.05;
  let b2 = zeros(f32[512]);
  let last = 0.0;
  let step = 0;
  while step < steps {{
    let l, g1, gb1, g2, gb2 = value_and_grad(loss, argnums=(0, 1, 2, 3))(w1, b1, w2, b2, x, y);
    w1 = w1 - 0.01 * g1;
    b1 = b1 - 0.01 * gb1;
    w2 = w2 - 0.01 * g2;
    b2 = b2 - 0.01 * gb2;
    last = l;
    step = step + 1;
  }}
  print("loss", last);
}}
"""


def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def shmapc_step_ms(shmapc, tmp, n, repeats, s1=2, s2=22):
    src = os.path.join(tmp, "mlp%d.smp" % n)
    with open(src, "w") as f:
        f.write(PROGRAM.format(n=n, rows=256 // n))
    exe = os.path.join(tmp, "mlp%d" % n)
    subprocess.run([shmapc, "compile", src, "-o", exe], check=True)
    a = min(wall([exe, "--steps=%d" % s1]) for _ in range(repeats))
    b = min(wall([exe, "--steps=%d" % s2]) for _ in range(repeats))
    return (b - a) / (s2 - s1) * 1e3


def best_line(cmd, repeats):
    """The run whose first number is smallest, as a list of floats."""
    runs = []
    for _ in range(repeats):
        out = subprocess.run(cmd, check=True, env=ENV, capture_output=True, text=True).stdout
        runs.append([float(v) for v in out.split()])
    return min(runs, key=lambda r: r[0])


def venv_python():
    try:
        return subprocess.run(["bash", os.path.join(ROOT, "tests", "jax", "venv.sh")], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", default=os.path.join(ROOT, "build", "compiler", "shmapc"))
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cexe = os.path.join(tmp, "mlp_c")
        subprocess.run(["gcc", "-O3", "-march=native", os.path.join(HERE, "mlp.c"), "-o", cexe,
                        "-I/usr/include/x86_64-linux-gnu/openblas-pthread", "-lopenblas", "-lm"],
                       check=True)
        c_step, c_gemm = best_line([cexe, "20"], a.repeats)[:2]
        rows.append(("C + OpenBLAS (hand-written)", c_step))
        rows.append(("  its 5 sgemm calls alone", c_gemm))
        rows.append(("numpy", best_line(["/usr/bin/python3", os.path.join(HERE, "mlp_numpy.py"), "20"], a.repeats)[0]))
        py = venv_python()
        if py:
            for name, script in (("JAX jit", "mlp_jax.py"), ("PyTorch", "mlp_torch.py")):
                try:
                    rows.append((name, best_line([py, os.path.join(HERE, script), "20"], a.repeats)[0]))
                except subprocess.CalledProcessError:
                    rows.append((name + " (not installed)", None))
        for n in (1, 2):
            rows.append(("shmapc, mesh %d" % n, shmapc_step_ms(a.shmapc, tmp, n, a.repeats)))
    print("MLP training step (batch 256, 512 -> 1024 -> ReLU -> 512, MSE, SGD), one BLAS thread")
    print("%-32s %10s %14s %14s" % ("", "ms/step", "x C step", "x sgemm time"))
    for name, ms in rows:
        if ms is None:
            print("%-32s %10s" % (name, "-"))
        else:
            print("%-32s %10.3f %14.2f %14.2f" % (name, ms, ms / c_step, ms / c_gemm))
    m1 = dict(rows)["shmapc, mesh 1"]
    print("shmapc mesh 2 / mesh 1: %.2f (ideal 0.5 on 2 cores)" % (dict(rows)["shmapc, mesh 2"] / m1))


if __name__ == "__main__":
    sys.exit(main())
