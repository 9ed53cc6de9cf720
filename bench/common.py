"""What issue 11's benchmark scripts (bench/*/run.py) share: the one-core pin, the
single-threaded library environment, timing a program from the outside, the per-step time of
a shmapc program with a `steps` argument, bench/setup.sh's python, and the command line."""
import argparse
import os
import shutil
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# One thread = pinned to one core, where there is more than one and taskset exists.
PIN = ["taskset", "-c", "0"] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []
# BLAS and OpenMP libraries on one thread (each peer's own threads are set by its script).
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def parser(doc):
    """The command line every benchmark takes: --shmapc and --repeats."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shmapc", default=os.path.join(ROOT, "build", "compiler", "shmapc"))
    ap.add_argument("--repeats", type=int, default=3)
    return ap


def wall(cmd):
    """Seconds one run of cmd takes (its output discarded)."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def seconds_per_step(exe, pin, repeats, s1, s2):
    """A shmapc program's time per step of its `steps` argument: (the quickest run of s2 steps
    - the quickest of s1) / (s2 - s1), which leaves out start-up and compilation. `pin` comes
    before the program (taskset, mpirun ...)."""
    return per_step_interleaved([lambda k: pin + [exe, "--steps=%d" % k]], repeats, s1, s2)[0]


def best_line(cmd, repeats):
    """The run whose first printed number is smallest, as a list of floats."""
    runs = []
    for _ in range(repeats):
        out = subprocess.run(cmd, check=True, env=ENV, capture_output=True, text=True).stdout
        runs.append([float(v) for v in out.split()])
    return min(runs, key=lambda r: r[0])


def venv_python():
    """bench/setup.sh's python (JAX and PyTorch), else the JAX twins' (no PyTorch), else None."""
    for script in (os.path.join(ROOT, "bench", "setup.sh"), os.path.join(ROOT, "tests", "jax", "venv.sh")):
        try:
            return subprocess.run(["bash", script], check=True, capture_output=True, text=True).stdout.strip()
        except (subprocess.CalledProcessError, FileNotFoundError):
            continue
    return None


def per_step_interleaved(cmds_for, repeats, s1, s2):
    """The time per step of several programs with a step count, each `cmds_for[i](k)` the
    command running program i for k steps: (quickest run of s2 steps - quickest of s1) /
    (s2 - s1), with the programs' runs interleaved, so that load coming and going on a shared
    machine falls on all of them alike."""
    best = [[float("inf"), float("inf")] for _ in cmds_for]
    for _ in range(repeats):
        for j, k in enumerate((s1, s2)):
            for i, cmd_for in enumerate(cmds_for):
                best[i][j] = min(best[i][j], wall(cmd_for(k)))
    return [(b - a) / (s2 - s1) for a, b in best]

