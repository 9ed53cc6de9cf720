#!/usr/bin/python3
"""The pipeline bubble benchmark: Alpa's two-stage MLP (four Dense + relu layers, two per stage,
as samples/pipeline_mlp.smp, with a learned shift of the input, so that stage 0's backward step
computes its input's cotangent as stage 1's does: the stages' forward and backward steps then
cost alike) trained by a @pipeline step on 2 device groups, each stage program on a core of its
own, for GPipe and 1F1B at several micro-batch counts. The runtime times every
step of each group and the waits for messages in it (--stats=pipeline); the measured bubble is
the share of the groups' time not spent computing, 1 - (time in steps - waits) / (2 x wall
time of the run), over every run but the first (which warms up), and the target is the textbook
(S-1)/(M+S-1) within 3 points (the stages are alike, so the fraction holds whatever a backward
step costs against a forward one).

    python3 bench/pipeline/run.py --shmapc build/compiler/shmapc [--quick] [--json PATH]

--quick: width 256, micro-batches 4 and 8, 2 repeats (the full run: width 512, 4, 8 and 16
micro-batches, 3 repeats); 3 steps, the first not counted."""
import os
import re
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
    best = None
    for _ in range(a.repeats):
        out = subprocess.run([exe, "--stats=pipeline", "--steps=%d" % a.steps], check=True, capture_output=True,
                             text=True, env=ENV).stdout
        got = re.search(r"measured bubble ([\d.]+)% \(predicted ([\d.]+)%\)", out)
        measured, predicted = float(got.group(1)), float(got.group(2))
        best = measured if best is None else min(best, measured)
    return best, predicted


def main():
    ap = parser(__doc__)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--microbatches", default="4,8,16")
    ap.add_argument("--steps", type=int, default=3)
    a = parse(ap, quick_repeats=2, width=256, microbatches="4,8", steps=3)
    rec = Record("pipeline", a, width=a.width, microbatches=a.microbatches, steps=a.steps, groups=2)
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        for schedule in ("gpipe", "1f1b"):
            for m in (int(x) for x in a.microbatches.split(",")):
                measured, predicted = measure(a, tmp, schedule, m, a.width)
                theory = 100.0 / (m + 1)  # (S-1)/(M+S-1), S = 2
                print("%-5s M=%2d: measured bubble %5.1f%%, predicted by the schedule %5.1f%%, (S-1)/(M+S-1) %5.1f%%"
                      % (schedule, m, measured, predicted, theory))
                rec.row("%s, %d micro-batches: measured bubble" % (schedule, m), measured, "%")
                rec.target("%s, %d micro-batches: |measured bubble - (S-1)/(M+S-1)|" % (schedule, m),
                           abs(measured - theory), "<=", 3.0, unit="points",
                           waived=None if cores >= 2 else "fewer than 2 cores: the stages cannot run at once")
    rec.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
