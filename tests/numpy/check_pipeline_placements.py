#!/usr/bin/python3
"""Pipelines of random placements and step orders run to the end with the whole batch's
gradients: the runtime half of the schedule fuzz (tests/unit/test_pipeline_schedule.cpp checks
the orders themselves).

Each trial writes a chain of S stages, h = tanh(h @ w_k) with a skip connection from the first
stage to the last, a loss of sum or mean over the examples, and a @pipeline train step with a
random schedule (gpipe, 1f1b, zb-h1), random micro-batches and a random placement of the S
stages on G device groups (every group holding one) -- and, in some trials, a random order=:
a random topological order of every step of the pipeline (F needs the previous stage's F, B
the stage's F and the next stage's B, W the stage's B), each group's steps taken from it in
turn, which cannot deadlock. Every other trial's step also returns the parameters after an SGD
step (w - 0.5 g: the update runs in the stage programs, sink-updates-into-stages). The program
runs threaded under a time limit (a hang fails) and its value, gradients and updated
parameters are compared with numpy's (the chain's backward written out by hand);
with --mpi it runs again as G MPI ranks, a rank per device group, its output the threaded
run's byte for byte.
Run with Debian's /usr/bin/python3 (it has numpy).
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shm_rng  # noqa: E402
from check_samples import parse_expected  # noqa: E402

WIDTH, BATCH = 3, 12
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mpi"))
from checks import MPIRUN as _MPIRUN  # noqa: E402
MPIRUN = _MPIRUN + ["--mca", "btl", "self,tcp"]


def program(S, G, M, schedule, placement, order, loss, update):
    lines = [f'mesh m = <["stage"={G}]>;', "", "def model(p, x) {", "  let h0 = tanh(x @ p.w0);", "  let h = h0;"]
    for k in range(1, S):
        lines += ["  stage_boundary();", f"  h = tanh(h @ p.w{k});"]
    lines += ["  return h + h0;", "}", "",
              "def loss(p, x) {", "  let y = model(p, x);",
              f"  return {loss}(y * y);", "}", ""]
    attrs = [f'mesh=m, axis="stage", microbatches={M}, schedule="{schedule}"',
             "placement=(" + ", ".join(map(str, placement)) + ")", "batch=(x)"]
    if order:
        attrs.append("order=(" + ", ".join(f'"{o}"' for o in order) + ")")
    step = ("{ let l, g = value_and_grad(loss)(p, x); return l, g, tree_map(sgd, p, g); }" if update
            else "{ return value_and_grad(loss)(p, x); }")
    lines += ["def sgd(w, d) { return w - 0.5 * d; }", "",
              "@pipeline(" + ", ".join(attrs) + ")",
              "def step(p, x) " + step, "",
              "def main() {",
              "  let p = {" + ", ".join(f"w{k}: random_normal(f32[{WIDTH}, {WIDTH}], seed={k + 1}) * 0.7"
                                        for k in range(S)) + "};",
              f"  let x = random_normal(f32[{BATCH}, {WIDTH}], seed=100);",
              "  let l, g, q = step(p, x);" if update else "  let l, g = step(p, x);", '  print("loss", l);']
    lines += [f'  print("g{k}", g.w{k});' for k in range(S)]
    if update:
        lines += [f'  print("q{k}", q.w{k});' for k in range(S)]
    lines += ["}"]
    return "\n".join(lines) + "\n"


def numpy_reference(S, loss):
    ws = [shm_rng.normal(np.float32, k + 1, WIDTH * WIDTH).reshape(WIDTH, WIDTH).astype(np.float64) *
          np.float32(0.7) for k in range(S)]
    x = shm_rng.normal(np.float32, 100, BATCH * WIDTH).reshape(BATCH, WIDTH).astype(np.float64)
    hs = [x]
    for k in range(S):
        hs.append(np.tanh(hs[-1] @ ws[k]))
    y = hs[-1] + hs[1] if S > 1 else 2 * hs[1]
    scale = 1.0 if loss == "sum" else 1.0 / y.size
    value = scale * np.sum(y * y)
    dy = 2 * scale * y
    grads = [None] * S
    dh = dy.copy()  # into h_S (the chain's end)
    skip = dy       # into h_1 (the skip connection)
    for k in reversed(range(S)):
        da = dh * (1 - hs[k + 1] ** 2)
        grads[k] = hs[k].T @ da
        dh = da @ ws[k].T
        if k == 1:
            dh = dh + skip
    return value, grads, ws


def random_order(S, G, M, schedule, placement, rng):
    """Each group's steps, taken in turn from a random topological order of all steps."""
    kinds = ["F"] if schedule == "inference" else ["F", "B", "W"] if schedule == "zb-h1" else ["F", "B"]
    def needs(k, s, m):
        if k == "F":
            return [("F", s - 1, m)] if s > 0 else []
        if k == "B":
            return [("F", s, m)] + ([("B", s + 1, m)] if s < S - 1 else [])
        return [("B", s, m)]
    todo = {(k, s, m) for k in kinds for s in range(S) for m in range(M)}
    done, order = set(), [[] for _ in range(G)]
    while todo:
        ready = sorted(x for x in todo if all(d in done for d in needs(*x)))
        x = rng.choice(ready)
        todo.remove(x)
        done.add(x)
        order[placement[x[1]]].append(f"{x[0]}{x[1]}.{x[2]}")
    return [" ".join(o) for o in order]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--seed", type=int, default=20261127)
    ap.add_argument("--mpi", action="store_true", help="also run each as MPI ranks")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(args.trials):
            G = rng.randint(1, 3)
            S = rng.randint(max(G, 2), G + 3)
            M = rng.choice([m for m in (1, 2, 3, 4, 6, 12)])
            schedule = rng.choice(["gpipe", "1f1b", "zb-h1"])
            placement = list(range(G)) + [rng.randrange(G) for _ in range(S - G)]
            rng.shuffle(placement)
            order = random_order(S, G, M, schedule, placement, rng) if rng.random() < 0.5 else None
            loss = rng.choice(["sum", "mean"])
            update = trial % 2 == 1
            what = (f"trial {trial}: S={S} G={G} M={M} {schedule} placement={placement} loss={loss}"
                    f"{' order given' if order else ''}{' with the update' if update else ''}")
            src = os.path.join(tmp, f"t{trial}.smp")
            with open(src, "w") as f:
                f.write(program(S, G, M, schedule, placement, order, loss, update))
            try:
                r = subprocess.run([args.shmapc, "run", src], capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                print(f"FAIL {what}: no result in 120 s (a hang)")
                failures += 1
                continue
            if r.returncode != 0:
                print(f"FAIL {what}: exit {r.returncode}\n{r.stderr}")
                failures += 1
                continue
            if args.mpi:
                exe = os.path.join(tmp, f"t{trial}")
                c = subprocess.run([args.shmapc, "compile", src, "--mpi", "-o", exe], capture_output=True, text=True,
                                   timeout=300)
                try:
                    m = subprocess.run(MPIRUN + ["-np", str(G), exe], capture_output=True, text=True, timeout=120,
                                       cwd=tmp) if c.returncode == 0 else c
                except subprocess.TimeoutExpired:
                    print(f"FAIL {what}: under MPI, no result in 120 s (a hang)")
                    failures += 1
                    continue
                if m.returncode != 0 or m.stdout != r.stdout:
                    print(f"FAIL {what}: under MPI (exit {m.returncode}) the output differs from the threaded run's\n"
                          f"{m.stdout}{m.stderr[-2000:]}")
                    failures += 1
                    continue
            out = os.path.join(tmp, f"t{trial}.out")
            with open(out, "w") as f:
                f.write(r.stdout)
            got = parse_expected(out)
            value, grads, ws = numpy_reference(S, loss)
            bad = []
            if not np.allclose(got["loss"], value, rtol=1e-4, atol=1e-5):
                bad.append(f"loss {got['loss']} vs numpy {value}")
            for k in range(S):
                if not np.allclose(got[f"g{k}"], grads[k], rtol=1e-4, atol=1e-5):
                    bad.append(f"g{k}: max abs diff {np.max(np.abs(got[f'g{k}'] - grads[k])):.3g}")
                if update and not np.allclose(got[f"q{k}"], ws[k] - 0.5 * grads[k], rtol=1e-4, atol=1e-5):
                    bad.append(f"q{k}: max abs diff {np.max(np.abs(got[f'q{k}'] - (ws[k] - 0.5 * grads[k]))):.3g}")
            print(("FAIL " if bad else "ok   ") + what + ("".join("\n  " + b for b in bad)))
            failures += bool(bad)
    print(f"{args.trials} random placements{' (threaded and MPI)' if args.mpi else ''}: "
          f"{args.trials - failures} agree with numpy, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
