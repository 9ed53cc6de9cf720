#!/usr/bin/python3
"""The training-step benchmark: the data-parallel MLP step (batch 256, 512 -> 1024 ->
ReLU -> 512, MSE, SGD) compiled by shmapc on meshes of 1 and 2 devices, against peers timed in
the same run: the same math written by hand in C on OpenBLAS and on oneDNN's sgemm (the library
shmapc's runtime uses for these sizes; its five sgemm calls alone are the compute bound), numpy,
and JAX jit and PyTorch when bench/setup.sh's virtual environment has them. Everything that
stands for "one thread" runs pinned to one core (taskset -c 0), so no library can borrow the
second core; the mesh of 2 runs unpinned on both. Prints ms per step, ratios, and the
training-step targets with where they stand; the quietest of several runs counts.

    python3 bench/train_step/run.py --shmapc build/compiler/shmapc [--repeats 3] [--quick] [--json PATH]

--quick: the same model and step counts, 2 repeats.

A shmapc program's time per step is measured from the outside: (time of S2 steps - time of S1
steps) / (S2 - S1), which leaves out start-up and compilation; its page faults per step the
same way (the children's minor faults, getrusage)."""
import os
import resource
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common import c_march, compile_flags, ENV, PIN, Record, parse, parser, best_line, peer_output, seconds_per_step, venv_python  # noqa: E402

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


def compile_mlp(shmapc, tmp, n):
    """The program on a mesh of n, compiled."""
    src = os.path.join(tmp, "mlp%d.smp" % n)
    with open(src, "w") as f:
        f.write(PROGRAM.format(n=n, rows=256 // n))
    exe = os.path.join(tmp, "mlp%d" % n)
    subprocess.run([shmapc, "compile", src, "-o", exe] + compile_flags(), check=True)
    return exe


def minor_faults(cmd):
    """The minor page faults of one run of cmd."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.DEVNULL)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before


def faults_per_step(exe, pin, repeats, s1, s2):
    """Page faults per step over steps s1..s2, measured as seconds_per_step measures time, the
    fewest of at least 5 runs each: a run's start-up faults are bimodal (its large blocks are
    offered to the kernel as huge pages, and one it cannot back with one costs 512 faults of
    4 KiB instead of 1), so two runs' difference can be a start-up's 512 faults, not the steps'."""
    repeats = max(repeats, 5)
    a = min(minor_faults(pin + [exe, "--steps=%d" % s1]) for _ in range(repeats))
    b = min(minor_faults(pin + [exe, "--steps=%d" % s2]) for _ in range(repeats))
    return max(b - a, 0) / (s2 - s1)


def build_c(tmp, name, *flags):
    exe = os.path.join(tmp, name)
    subprocess.run(["gcc", "-O3"] + c_march() + [os.path.join(HERE, "mlp.c"), "-o", exe,
                    "-I/usr/include/x86_64-linux-gnu/openblas-pthread"] + list(flags) + ["-lopenblas", "-lm"],
                   check=True)
    return exe


def ratio(x, y):
    return "%.2fx" % (x / y) if x and y else "-"


def main():
    a = parse(parser(__doc__), quick_repeats=2)
    rows, faults = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        c_blas = build_c(tmp, "mlp_openblas")
        c_dnnl = build_c(tmp, "mlp_dnnl", "-DUSE_DNNL", "-ldnnl", "-fopenmp")
        c_half = build_c(tmp, "mlp_dnnl_half", "-DUSE_DNNL", "-DBATCH=128", "-ldnnl", "-fopenmp")
        step, gemm = best_line(PIN + [c_blas, "20"], a.repeats)[:2]
        rows += [("C + OpenBLAS (hand-written)", step), ("  its 5 sgemm calls alone", gemm)]
        c_step, c_gemm = best_line(PIN + [c_dnnl, "20"], a.repeats)[:2]
        rows += [("C + oneDNN (hand-written)", c_step), ("  its 5 sgemm calls alone", c_gemm)]
        half = best_line(PIN + [c_half, "20"], a.repeats)[0]
        rows.append(("  at batch 128 (one of 2 devices)", half))
        ms = peer_output(PIN + ["/usr/bin/python3", os.path.join(HERE, "mlp_numpy.py"), "20"], a.repeats)
        rows.append(("numpy" if ms else "numpy (not installed)", ms))
        py = venv_python()
        peers = {}
        for name, script in (("JAX jit", "mlp_jax.py"), ("PyTorch", "mlp_torch.py")):
            peers[name] = peer_output(PIN + [py, os.path.join(HERE, script), "20"], a.repeats) if py else None
            rows.append((name if peers[name] else name + " (not installed: bench/setup.sh)", peers[name]))
        exes = {n: compile_mlp(a.shmapc, tmp, n) for n in (1, 2, 4, 8)}
        for n in (1, 2):
            pin = PIN if n == 1 else []
            rows.append(("shmapc, mesh %d" % n, seconds_per_step(exes[n], pin, a.repeats, 2, 22) * 1e3))
            faults[n] = faults_per_step(exes[n], pin, a.repeats, 1, 301)  # steps 2..301
        # Meshes on every core: shmapc against JAX's shard_map on as many host devices (the
        # mesh of 2 was timed so above).
        meshes = []
        for n in (1, 2, 4, 8):
            ms = dict(rows)["shmapc, mesh 2"] if n == 2 else seconds_per_step(exes[n], [], a.repeats, 2, 22) * 1e3
            jx = peer_output([py, os.path.join(HERE, "mlp_jax.py"), "20", str(n)], a.repeats) if py else None
            meshes.append((n, ms, jx))
    print("MLP training step (batch 256, 512 -> 1024 -> ReLU -> 512, MSE, SGD); one thread pinned to")
    print("one core, except shmapc's mesh of 2 (two device threads on two cores)")
    print("%-36s %10s %14s %16s" % ("", "ms/step", "x C + oneDNN", "x oneDNN sgemm"))
    for name, ms in rows:
        if ms is None:
            print("%-36s %10s" % (name, "-"))
        else:
            print("%-36s %10.3f %14.2f %16.2f" % (name, ms, ms / c_step, ms / c_gemm))
    got = dict(rows)
    m1, m2 = got["shmapc, mesh 1"], got["shmapc, mesh 2"]

    print()
    print("the same step on meshes of N devices, every core (%d here)" % (os.cpu_count() or 1))
    print("%-8s %14s %22s %10s" % ("mesh", "shmapc ms", "JAX shard_map ms", "ratio"))
    for n, ms, jx in meshes:
        print("%-8d %14.3f %22s %10s" % (n, ms, "%.3f" % jx if jx else "-", ratio(ms, jx)))
    print("a mesh of 1 on every core / on one core: %s (its one device uses the idle cores)"
          % ratio(meshes[0][1], m1))
    print()
    print("the training-step targets (this run)")
    print("%-46s %8s %8s" % ("measure", "now", "target"))
    print("%-46s %8s %8s" % ("MLP step, mesh 1 / its sgemm time", ratio(m1, c_gemm), "<= 1.10x"))
    print("%-46s %8s %8s" % ("MLP step, mesh 1 / PyTorch, 1 thread", ratio(m1, peers["PyTorch"]), "< 0.9x"))
    print("%-46s %8s %8s" % ("MLP step, mesh 1 / JAX jit, 1 thread", ratio(m1, peers["JAX jit"]), "<= 0.8x"))
    print("%-46s %8s %8s   (hand-written C, batch 128 / 256: %s)" % (
        "MLP step, mesh 2 / mesh 1", ratio(m2, m1), "<= 0.55x", ratio(half, c_step)))
    for n in (1, 2):
        print("%-46s %8s %8s" % ("page faults per training step after the first, mesh %d" % n,
                                 "%.2f" % faults[n], "0"))
    record(a, rows, meshes, peers, faults, c_step, c_gemm, half)


# The page-fault target is none per step; counted over 300 steps, the operating system adds a
# stray fault now and then (0.01-0.04 a step in the README's runs), so up to one fault in ten
# steps counts as none, and a buffer allocated afresh every step (one or more a step) fails.
FAULTS_BOUND = 0.1


def record(a, rows, meshes, peers, faults, c_step, c_gemm, half):
    """The rows and the training-step targets for --json."""
    rec = Record("train_step", a, batch=256)
    parent = ""
    for name, ms in rows:
        if not name.startswith(" "):
            parent = name.split(" (")[0]
        else:  # "  its 5 sgemm calls alone" under its C program
            name = "%s: %s" % (parent, name.strip())
        rec.row(name, ms, "ms/step",
                peers={"C + oneDNN": ms / c_step, "oneDNN sgemm": ms / c_gemm} if ms else None)
    for n, ms, jx in meshes:
        rec.row("shmapc, mesh %d, every core" % n, ms, "ms/step",
                peers={"JAX shard_map": ms / jx} if jx else None)
        rec.row("JAX shard_map, mesh %d, every core" % n, jx, "ms/step")
    got = dict(rows)
    m1, m2 = got["shmapc, mesh 1"], got["shmapc, mesh 2"]
    rec.target("MLP step, mesh 1 / its sgemm time (C + oneDNN)", m1 / c_gemm, "<=", 1.10)
    rec.target("MLP step, mesh 1 / PyTorch, 1 thread", m1 / peers["PyTorch"] if peers["PyTorch"] else None, "<", 0.9)
    rec.target("MLP step, mesh 1 / JAX jit, 1 thread", m1 / peers["JAX jit"] if peers["JAX jit"] else None, "<=", 0.8)
    # A mesh of 2 cannot beat the hand-written C program's own ratio at half the batch (its
    # five sgemm calls cost as much for the weights at batch 128): where that is above the
    # bound, the target is out of reach on this CPU (README, "The mesh of 2 cannot reach").
    c_ratio = half / c_step
    rec.target("MLP step, mesh 2 / mesh 1", m2 / m1, "<=", 0.55,
               waived="hand-written C, batch 128 / 256: %.2fx" % c_ratio if c_ratio > 0.55 else None)
    for n in (1, 2):
        rec.target("page faults per training step after the first, mesh %d" % n, faults[n], "<=", FAULTS_BOUND,
                   unit="faults/step")
    rec.write()


if __name__ == "__main__":
    sys.exit(main())
