#!/usr/bin/python3
"""The memory benchmark: the peak resident memory of a collective program on a mesh of 8
devices against a hand-written threaded C program doing the same (collectives.c: 8 threads,
the input once, the result once). Two programs over N = 1e7 f32 values (40 MB) made on the
host and split over the devices: their psum (the result f32[N/8], replicated) and their
all_gather_invariant (the result f32[N], replicated). Prints the peak RSS of each (getrusage of the
child, in MB) and the ratio shmapc / C, whose target is <= 1.3x; and the wall time of each
whole run (start-up: the input made on the host and placed on the devices, the collective,
the sum) against the C program's, as a ratio.

    python3 bench/memory/run.py --shmapc build/compiler/shmapc [--quick] [--json PATH]

--quick: the same sizes, 2 repeats."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common import compile_flags, Record, parse, parser, wall  # noqa: E402
N = 10_000_000

PROGRAMS = {
    "psum": """mesh m = <["x"=8]>;
@shmap(mesh=m, in_specs=(P("x"),), out_specs=P())
def total(x: f32[{b}]) -> f32[{b}] {{ return psum(x, "x"); }}
def main() {{
  let x = random_uniform(f32[{n}], seed=1);
  print("sum", sum(total(x)));
}}
""",
    "all_gather": """mesh m = <["x"=8]>;
@shmap(mesh=m, in_specs=(P("x"),), out_specs=P())
def gathered(x: f32[{b}]) -> f32[{n}] {{ return all_gather_invariant(x, "x", axis=0, tiled=true); }}
def main() {{
  let x = random_uniform(f32[{n}], seed=1);
  print("sum", sum(gathered(x)));
}}
""",
}


def peak_mb(cmd):
    """Peak RSS of one run of cmd, in MB (each run in a fresh process: ru_maxrss of children
    is the maximum over all waited children, so measure through a wrapper)."""
    wrapper = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
               "stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", wrapper] + cmd, check=True, capture_output=True, text=True)
    return int(out.stdout.split()[-1]) / 1024.0


def main():
    a = parse(parser(__doc__), quick_repeats=2)
    rec = Record("memory", a, elements=N, devices=8)
    with tempfile.TemporaryDirectory() as tmp:
        cexe = os.path.join(tmp, "collectives")
        subprocess.run(["gcc", "-O2", os.path.join(HERE, "collectives.c"), "-o", cexe, "-lpthread"], check=True)
        print("peak resident memory, mesh of 8, N = %d f32 (%d MB) made on the host" % (N, N * 4 // 10**6))
        print("%-12s %12s %12s %10s %8s %11s %8s %8s" % ("", "shmapc MB", "C MB", "ratio", "target",
                                                        "shmapc ms", "C ms", "ratio"))
        for name, text in PROGRAMS.items():
            src = os.path.join(tmp, name + ".smp")
            with open(src, "w") as f:
                f.write(text.format(n=N, b=N // 8))
            exe = os.path.join(tmp, name)
            subprocess.run([a.shmapc, "compile", src, "-o", exe] + compile_flags(), check=True)
            s = min(peak_mb([exe]) for _ in range(a.repeats))
            c = min(peak_mb([cexe, name, str(N)]) for _ in range(a.repeats))
            ts = min(wall([exe]) for _ in range(a.repeats)) * 1e3
            tc = min(wall([cexe, name, str(N)]) for _ in range(a.repeats)) * 1e3
            print("%-12s %12.1f %12.1f %9.2fx %8s %11.1f %8.1f %7.2fx" % (name, s, c, s / c, "<= 1.3x", ts, tc, ts / tc))
            rec.row("%s, peak resident memory" % name, s, "MB", peers={"hand-written C": s / c})
            rec.row("%s, whole run (start-up, collective, sum)" % name, ts, "ms", peers={"hand-written C": ts / tc})
            rec.target("peak memory of %s / hand-written threads" % name, s / c, "<=", 1.3)
    rec.write()


if __name__ == "__main__":
    sys.exit(main())
