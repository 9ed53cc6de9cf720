#!/usr/bin/python3
"""The pipeline bubble benchmark: Alpa's two-stage MLP (four Dense + relu layers, two per stage,
as samples/pipeline_mlp.smp, with a learned shift of the input, so that stage 0's backward step
computes its input's cotangent as stage 1's does: the stages' forward and backward steps then
cost alike) trained by a @pipeline step on 2 device groups, each stage program on a core of its
own, for GPipe and 1F1B at several micro-batch counts. The runtime times every
step of each group and the waits for messages in it (--stats=pipeline), and the stage programs'
peak host memory against the plan --emit=stages prints; the measured bubble is
the share of the groups' time not spent computing, 1 - (time in steps - waits) / (2 x wall
time of the run), over every run but the first (which warms up), and the target is the textbook
(S-1)/(M+S-1) within 3 points (the stages are alike, so the fraction holds whatever a backward
step costs against a forward one).

    python3 bench/pipeline/run.py --shmapc build/compiler/shmapc [--quick] [--json PATH]

For more stages than the machine has cores, the schedules are replayed with the step durations
measured here: a --trace of the 1F1B run gives each stage's mean forward and backward step, and
the compiler's own schedules for S = 4 and 8 stages (stage s timed as measured stage s % 2) run
through their dependency simulation with those durations (shmap_pipeline_replay, built beside
shmapc); the replayed bubble is held to (S-1)/(M+S-1) likewise.

Under MPI, a rank per stage, each stage's parameters and batch arrays live on its ranks alone:
the operand bytes a stage's ranks keep (--stats=pipeline) and the host bytes a rank measured it
held for them (SHMAP_LOG_RANKS=1), each against the whole (one rank running both stages), are
held to about half (<= 0.55: the stages are alike; stage 0 has a shift more).

--quick: width 256, micro-batches 4 and 8, 3 repeats (the full run: width 512, 4, 8 and 16
micro-batches, 3 repeats); 3 steps, the first not counted."""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common import compile_flags, ENV, Record, parse, parser  # noqa: E402

PROGRAM = """arg steps: i32 = 3;
mesh m = <["stage"=2]>;

def dense(x, w, b) {{ return maximum(x @ w + b, 0.0); }}

def mlp(p, x) {{
  let h = dense(dense(x + p.shift, p.w1, p.b1), p.w2, p.b2);
  stage_boundary();
  return dense(dense(h, p.w3, p.b3), p.w4, p.b4);
}}

def loss(p, x, y) {{
  let d = mlp(p, x) - y;
  return mean(d * d);
}}

def sgd(w, g) {{ return w - 0.01 * g; }}

@pipeline(mesh=m, axis="stage", microbatches={M}, schedule="{schedule}", batch=(x, y))
def train_step(p, x, y) {{
  let l, g = value_and_grad(loss)(p, x, y);
  return l, tree_map(sgd, p, g);
}}

def main() {{
  let p = {{shift: zeros(f32[{H}]), w1: random_normal(f32[{H}, {F}], seed=1) * {s1}, b1: zeros(f32[{F}]),
           w2: random_normal(f32[{F}, {H}], seed=2) * {s2}, b2: zeros(f32[{H}]),
           w3: random_normal(f32[{H}, {F}], seed=3) * {s1}, b3: zeros(f32[{F}]),
           w4: random_normal(f32[{F}, {H}], seed=4) * {s2}, b4: zeros(f32[{H}])}};
  let x = random_normal(f32[{B}, {H}], seed=5);
  let y = maximum(random_normal(f32[{B}, {H}], seed=6), 0.0);
  let s = 0;
  while s < steps {{
    let l, q = train_step(p, x, y);
    p = q;
    s = s + 1;
  }}
  print("w4[0, 0]", p.w4[0, 0]);
}}
"""

ROWS_PER_MICROBATCH = 64


def measure(a, tmp, schedule, m, h):
    src = os.path.join(tmp, "%s_%d.smp" % (schedule, m))
    with open(src, "w") as f:
        f.write(PROGRAM.format(M=m, schedule=schedule, H=h, F=4 * h, B=m * ROWS_PER_MICROBATCH,
                               s1=round(1 / h ** 0.5, 6), s2=round(1 / (4 * h) ** 0.5, 6)))
    exe = src[:-4]
    subprocess.run([a.shmapc, "compile", src, "-o", exe] + compile_flags(), check=True)
    stages = subprocess.run([a.shmapc, "compile", src, "--emit=stages", "-o", "-"] + compile_flags(), check=True,
                            capture_output=True, text=True).stdout
    planned = sum(int(b) for b in re.findall(r"stage program: (\d+) bytes of host memory planned", stages))
    best, peak = None, 0
    for _ in range(a.repeats):
        out = subprocess.run([exe, "--stats=pipeline", "--steps=%d" % a.steps], check=True, capture_output=True,
                             text=True, env=ENV).stdout
        got = re.search(r"measured bubble ([\d.]+)% \(predicted ([\d.]+)%\)", out)
        measured, predicted = float(got.group(1)), float(got.group(2))
        best = measured if best is None else min(best, measured)
        peak = max(peak, sum(int(b) for b in re.findall(r"host memory at most (\d+) bytes", out)))
    return best, predicted, peak, planned


def kept_under_mpi(a, tmp, m):
    """The 1F1B program of m micro-batches under MPI, a rank per stage: per group, the operand
    bytes its ranks keep and the pipeline's operand bytes in all (--stats=pipeline); per rank,
    the most bytes it held for its group's values, and what one rank running both groups held
    (SHMAP_LOG_RANKS=1). None where mpirun is missing."""
    if not shutil.which("mpirun"):
        return None
    src = os.path.join(tmp, "1f1b_%d.smp" % m)
    exe = src[:-4] + "_mpi"
    subprocess.run([a.shmapc, "compile", src, "--mpi", "-o", exe] + compile_flags(), check=True)
    env = dict(ENV, SHMAP_LOG_RANKS="1")

    def run(ranks, per_rank):
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), exe, "--stats=pipeline",
               "--steps=%d" % a.steps, "--devices-per-rank=%d" % per_rank]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
        held = [int(x) for x in re.findall(r"kept by the rank's pipeline group alone: at most (\d+) bytes", out.stderr)]
        kept = [(int(k), int(t)) for k, t in re.findall(r"its ranks keep (\d+) of the operands' (\d+) bytes",
                                                        out.stdout + out.stderr)]
        return held, kept

    one, _ = run(1, 2)
    held, kept = run(2, 1)
    return kept, held, max(one) if one else 0


def step_durations(a, tmp, m):
    """Per measured stage, its mean forward and backward step in seconds (a --trace of 1F1B),
    over every run but the first (which warms up: the buffers' first pages, the kernels' first
    calls), as --stats=pipeline counts."""
    exe = os.path.join(tmp, "1f1b_%d" % m)
    trace = os.path.join(tmp, "trace.json")
    subprocess.run([exe, "--trace=" + trace, "--steps=%d" % a.steps], check=True, capture_output=True, env=ENV)
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    spans = collections.defaultdict(list)
    for e in sorted(events, key=lambda e: e.get("ts", 0)):
        got = re.fullmatch(r"([FB]) s(\d+) mb\d+", e.get("name", ""))
        if got and e.get("ph") == "X":
            spans[(int(got.group(2)), got.group(1))].append(e["dur"] * 1e-6)
    for key in spans:  # (each run has m of each; the first run's are left out)
        spans[key] = spans[key][m:] if len(spans[key]) > m else spans[key]
    return [(sum(spans[(s, "F")]) / len(spans[(s, "F")]), sum(spans[(s, "B")]) / len(spans[(s, "B")]))
            for s in (0, 1)]


def replay(a, schedule, stages, m, durations):
    tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.shmapc))), "bench", "shmap_pipeline_replay")
    args = [tool, schedule, str(stages), str(m)] + ["%.9f" % t for pair in durations for t in pair]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return float(re.search(r"replayed bubble ([\d.]+)%", out).group(1))


def main():
    ap = parser(__doc__)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--microbatches", default="4,8,16")
    ap.add_argument("--steps", type=int, default=3)
    a = parse(ap, quick_repeats=3, width=256, microbatches="4,8", steps=3)
    rec = Record("pipeline", a, width=a.width, microbatches=a.microbatches, steps=a.steps, groups=2)
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        for schedule in ("gpipe", "1f1b"):
            for m in (int(x) for x in a.microbatches.split(",")):
                measured, predicted, peak, planned = measure(a, tmp, schedule, m, a.width)
                theory = 100.0 / (m + 1)  # (S-1)/(M+S-1), S = 2
                print("%-5s M=%2d: measured bubble %5.1f%%, predicted by the schedule %5.1f%%, (S-1)/(M+S-1) %5.1f%%"
                      % (schedule, m, measured, predicted, theory))
                rec.row("%s, %d micro-batches: measured bubble" % (schedule, m), measured, "%")
                rec.target("%s, %d micro-batches: |measured bubble - (S-1)/(M+S-1)|" % (schedule, m),
                           abs(measured - theory), "<=", 3.0, unit="points",
                           waived=None if cores >= 2 else "fewer than 2 cores: the stages cannot run at once")
                # The stage programs' host memory (activations, residuals, messages, gradient sums):
                # its peak, measured on the groups' threads, against --emit=stages's plan.
                print("%-5s M=%2d: peak host memory %.1f KiB, planned %.1f KiB" % (schedule, m, peak / 1024,
                                                                                 planned / 1024))
                rec.row("%s, %d micro-batches: planned host memory of the stage programs" % (schedule, m),
                        planned / 1024, "KiB")
                rec.target("%s, %d micro-batches: peak host memory / planned" % (schedule, m),
                           peak / planned if planned else None, "<=", 1.0)
        largest = max(int(x) for x in a.microbatches.split(","))
        # A parameter lives only on its stage's ranks: under MPI with a rank per stage, the share
        # of the model's bytes (parameters and batch) a stage's ranks keep, and the host bytes a
        # rank measured it held for its stage's values against one rank running both stages.
        got = kept_under_mpi(a, tmp, largest)
        if got:
            kept, held, one = got
            share = max(k for k, _ in kept) / kept[0][1] if kept else None
            measured = max(held) / one if held and one else None
            print("1f1b  M=%2d under MPI, a rank per stage: a stage keeps %s of the operands' bytes; a rank held %s "
                  "bytes for its stage's values, one rank running both %d" % (largest, kept, held, one))
            rec.target("1f1b, %d micro-batches, 2 ranks: operand bytes a stage's ranks keep / all" % largest,
                       share, "<=", 0.55)
            rec.target("1f1b, %d micro-batches, 2 ranks: bytes a rank held for its stage's values / one rank's" % largest,
                       measured, "<=", 0.55)
        else:
            print("mpirun not found: the bytes a rank keeps under MPI are not measured")
        durations = step_durations(a, tmp, largest)
        print("measured steps (ms): " + ", ".join("stage %d F %.3f B %.3f" % (s, f * 1e3, b * 1e3)
                                                 for s, (f, b) in enumerate(durations)))
        for schedule in ("gpipe", "1f1b"):
            for stages in (4, 8):
                m = 2 * stages
                replayed = replay(a, schedule, stages, m, durations)
                theory = 100.0 * (stages - 1) / (m + stages - 1)
                print("%-5s S=%d M=%2d: replayed bubble %5.1f%%, (S-1)/(M+S-1) %5.1f%%"
                      % (schedule, stages, m, replayed, theory))
                rec.row("%s, %d stages, %d micro-batches: replayed bubble" % (schedule, stages, m), replayed, "%")
                rec.target("%s, %d stages, %d micro-batches: |replayed bubble - (S-1)/(M+S-1)|" % (schedule, stages, m),
                           abs(replayed - theory), "<=", 3.0, unit="points")
    rec.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
