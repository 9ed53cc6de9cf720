#!/usr/bin/python3
"""The tracing benchmark: the cost of --trace. bench/train_step's MLP training step (a mesh of 4
devices: matmuls and an all-reduce of the gradients every step, so each step records several
spans on each device) timed per step three ways: linked with a runtime whose hooks are
compiled out (shmap_runtime_notrace, through SHMAPC_RUNTIME_LIB), with the usual runtime
untraced (each hook tests one global flag), and traced. The time per step is (S2 steps - S1
steps) / (S2 - S1), the best of --repeats, the runs interleaved. Prints microseconds per step,
the events recorded per step, and the ratios to the hook-free program.

    python3 bench/trace/run.py --shmapc build/compiler/shmapc [--quick] [--json PATH]

--quick: the same step counts, 2 repeats."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common import compile_flags, Record, parse, parser, per_step_interleaved  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "train_step"))
from run import PROGRAM as MLP  # noqa: E402  (bench/train_step/run.py)

S1, S2 = 5, 45


def main():
    a = parse(parser(__doc__), quick_repeats=2)
    build = os.path.dirname(os.path.dirname(os.path.abspath(a.shmapc)))
    subprocess.run(["cmake", "--build", build, "--target", "shmap_runtime_notrace"], check=True,
                   stdout=subprocess.DEVNULL)
    notrace_lib = os.path.join(build, "runtime", "libshmap_runtime_notrace.a")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe, bare, trace = (os.path.join(tmp, n) for n in ("mlp.smp", "mlp", "mlp_notrace", "run.json"))
        with open(src, "w") as f:
            f.write(MLP.format(n=4, rows=64))
        subprocess.run([a.shmapc, "compile", src, "-o", exe] + compile_flags(), check=True)
        subprocess.run([a.shmapc, "compile", src, "-o", bare] + compile_flags(), check=True,
                       env=dict(os.environ, SHMAPC_RUNTIME_LIB=notrace_lib))
        none, off, on = per_step_interleaved([lambda k: [bare, "--steps=%d" % k],
                                              lambda k: [exe, "--steps=%d" % k],
                                              lambda k: [exe, "--steps=%d" % k, "--trace=" + trace]], a.repeats, S1, S2)
        counts = {}
        for k in (S1, S2):
            subprocess.run([exe, "--steps=%d" % k, "--trace=" + trace], check=True, stdout=subprocess.DEVNULL)
            counts[k] = len(json.load(open(trace))["traceEvents"])
    per_step = (counts[S2] - counts[S1]) / (S2 - S1)
    print("MLP training step (us): %.1f without hooks, %.1f untraced (%.3fx), %.1f traced (%.3fx; %.0f events a step)"
          % (none * 1e6, off * 1e6, off / none, on * 1e6, on / none, per_step))
    rec = Record("trace", a, devices=4)
    rec.row("MLP step (mesh 4), runtime without hooks", none * 1e6, "us/step")
    rec.row("MLP step (mesh 4), untraced", off * 1e6, "us/step", peers={"without hooks": off / none})
    rec.row("MLP step (mesh 4), traced", on * 1e6, "us/step", peers={"without hooks": on / none})
    rec.row("trace events per step", per_step, "events/step")
    rec.write()


if __name__ == "__main__":
    main()
