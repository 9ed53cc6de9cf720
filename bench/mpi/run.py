#!/usr/bin/python3
"""Issue 12's benchmark: each collective through shmapc's MPI backend against the same
collective written by hand with MPI (collectives_mpi.c: MPI_Allreduce, MPI_Allgather,
MPI_Reduce_scatter_block, MPI_Alltoall, MPI_Sendrecv), timed in the same run. A shmapc program
runs the collective `steps` times inside one shmap (so the time is the collective's, not the
shmap call's), each step's result scaled by 0.5 and fed to the next, on N f32 per rank; the
time per step is (time of S2 steps - time of S1 steps) / (S2 - S1), the best of --repeats,
the runs of the programs compared interleaved (load on a shared machine falls on each alike).
Prints microseconds per step and the ratio shmapc / hand-written, whose target is <= 1.1x.
Then the MLP training step of bench/train_step on meshes of 1, 2, 4 and 8 devices, as that
many MPI ranks, as 2 ranks of several devices (4 and 8) and as threads of one process.

    python3 bench/mpi/run.py --shmapc build/compiler/shmapc [--ranks 2] [--n 262144] [--quick] [--json PATH]

--quick: 2 repeats and so 1000 steps where the default is 200 (with fewer runs to take the
quickest of, the steps must outweigh mpirun's start-up, which varies by tens of ms); the MLP
step on meshes of 1, 2 and 4."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common import compile_flags, Record, parse, parser, per_step_interleaved  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "train_step"))
from run import PROGRAM as MLP  # noqa: E402  (bench/train_step/run.py)

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]
# The training step's ranks may use every core, as the threads of one process do (a rank that
# Open MPI binds to one core runs a device's team on it alone: docs/runtime.md, "Binding").
MLP_MPIRUN = MPIRUN + ["--bind-to", "none"]


def step(kind, r, n):
    """The collective on x (f32[n] per device) and the next x (f32[n]) from its result y."""
    ring = ", ".join("(%d, %d)" % (i, (i + 1) % r) for i in range(r))
    return {
        "psum": ('psum(x, "i")', "y"),
        "all_gather": ('all_gather(x[0:%d], "i", axis=0, tiled=true)' % (n // r), "y"),
        "psum_scatter": ('psum_scatter(x, "i", scatter_dimension=0, tiled=true)',
                         "concatenate([%s], axis=0)" % ", ".join(["y"] * r)),
        "all_to_all": ('all_to_all(x, "i", 0, 0, tiled=true)', "y"),
        "ppermute": ('ppermute(x, "i", perm=[%s])' % ring, "y"),
    }[kind]


def program(kind, r, n):
    collective, nxt = step(kind, r, n)
    return """arg steps: i32 = 10;
mesh m = <["i"={r}]>;

@shmap(mesh=m, in_specs=(P("i"), P()), out_specs=P("i"))
def bench(x0: f32[{n}], count: i32[]) -> f32[{n}] {{
  let x = x0;
  let s = 0;
  while s < count {{
    let y = {collective};
    x = {nxt} * 0.5;
    s = s + 1;
  }}
  return x;
}}

def main() {{
  let x = iota(f32[{total}]) * 0.001;
  print("sum", sum(bench(x, steps)));
}}
""".format(r=r, n=n, total=r * n, collective=collective, nxt=nxt)


def main():
    ap = parser(__doc__)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--n", type=int, default=1 << 18)
    ap.add_argument("--steps", type=int, default=200)
    a = parse(ap, quick_repeats=2, steps=1000)
    rec = Record("mpi", a, ranks=a.ranks, n=a.n, steps=a.steps)
    r, n = a.ranks, a.n
    print("collectives over %d MPI ranks, %d f32 per rank (microseconds per step, best of %d)" % (r, n, a.repeats))
    print("%-14s %12s %14s %8s %8s" % ("", "shmapc --mpi", "hand-written", "ratio", "target"))
    with tempfile.TemporaryDirectory() as tmp:
        cexe = os.path.join(tmp, "collectives_mpi")
        subprocess.run(["mpicc", "-O3", "-march=native", os.path.join(HERE, "collectives_mpi.c"), "-o", cexe], check=True)
        for kind in ("psum", "all_gather", "psum_scatter", "all_to_all", "ppermute"):
            src = os.path.join(tmp, kind + ".smp")
            with open(src, "w") as f:
                f.write(program(kind, r, n))
            exe = os.path.join(tmp, kind)
            subprocess.run([a.shmapc, "compile", src, "--mpi", "-o", exe] + compile_flags(), check=True)
            s, c = per_step_interleaved(
                [lambda k: MPIRUN + ["-np", str(r), exe, "--steps=%d" % k],
                 lambda k: MPIRUN + ["-np", str(r), cexe, kind, str(n), str(k)]], a.repeats, 10, 10 + a.steps)
            print("%-14s %12.1f %14.1f %7.2fx %8s" % (kind, s * 1e6, c * 1e6, s / c, "<= 1.1x"))
            rec.row("%s, shmapc --mpi" % kind, s * 1e6, "us/step", peers={"hand-written MPI": s / c})
            rec.target("%s through the MPI backend / hand-written MPI" % kind, s / c, "<=", 1.1)
        print()
        print("MLP training step (bench/train_step), ms per step, a mesh of N devices: as N MPI ranks, as 2 ranks")
        print("of N/2 devices each (--devices-per-rank), and as N threads of one process (the ratios)")
        print("%-6s %10s %10s %10s %9s %9s" % ("N", "N ranks", "2 ranks", "threads", "N ranks", "2 ranks"))
        for m in (1, 2, 4) if a.quick else (1, 2, 4, 8):
            src = os.path.join(tmp, "mlp%d.smp" % m)
            with open(src, "w") as f:
                f.write(MLP.format(n=m, rows=256 // m))
            threads, ranks = os.path.join(tmp, "mlp%d" % m), os.path.join(tmp, "mlp%d_mpi" % m)
            subprocess.run([a.shmapc, "compile", src, "-o", threads] + compile_flags(), check=True)
            subprocess.run([a.shmapc, "compile", src, "--mpi", "-o", ranks] + compile_flags(), check=True)
            runs = [lambda k: [threads, "--steps=%d" % k],
                    lambda k: MLP_MPIRUN + ["-np", str(m), ranks, "--steps=%d" % k]]
            if m >= 4:
                runs.append(lambda k: MLP_MPIRUN + ["-np", "2", ranks, "--steps=%d" % k,
                                                    "--devices-per-rank=%d" % (m // 2)])
            t, q, *q2 = per_step_interleaved(runs, a.repeats, 2, 22)
            if m >= 4:
                q2 = q2[0]
                print("%-6d %10.2f %10.2f %10.2f %8.2fx %8.2fx" % (m, q * 1e3, q2 * 1e3, t * 1e3, q / t, q2 / t))
                rec.row("MLP step, mesh %d as 2 ranks" % m, q2 * 1e3, "ms/step", peers={"threads": q2 / t})
            else:
                print("%-6d %10.2f %10s %10.2f %8.2fx %9s" % (m, q * 1e3, "", t * 1e3, q / t, ""))
            rec.row("MLP step, mesh %d as %d ranks" % (m, m), q * 1e3, "ms/step", peers={"threads": q / t})
            rec.row("MLP step, mesh %d as threads" % m, t * 1e3, "ms/step")
    rec.write()


if __name__ == "__main__":
    sys.exit(main())
