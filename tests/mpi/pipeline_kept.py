#!/usr/bin/env python3
"""Under MPI a pipeline's parameters and optimizer state live only on the ranks of the stage
that reads and updates them (docs/runtime.md, "Pipelines under MPI"): the memory reason for
pipelining, measured.

For each program and job layout below:
- --stats=pipeline's "its ranks keep K of the operands' T bytes" per device group equals what
  the model's shapes give: the group's own parameters (with the Adam moments, for the
  Transformer) and batch arrays, plus what every rank keeps (values both stages read: the
  tokens, the tied embedding, the step count); T is the sum over every operand;
- the bytes each rank measures it held for values kept by its group alone
  (SHMAP_LOG_RANKS's "host values kept by the rank's pipeline group alone: at most M bytes")
  are the same on every rank of a group, more than nothing, less than one process keeps
  (mpirun -np 1 --devices-per-rank=N: every group's values in one process), and the groups'
  together equal that one process's: each value is kept on one group's ranks, none twice;
- the output equals the threaded run's.

    python3 tests/mpi/pipeline_kept.py --shmapc build/compiler/shmapc
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import checks  # noqa: E402
from checks import FAILED, expect  # noqa: E402
import golden  # noqa: E402


def f32(*shape):
    n = 4
    for d in shape:
        n *= d
    return n


# samples/pipeline_mlp.smp: stage 0 is Dense(16 -> 64), Dense(64 -> 16) and reads the inputs x
# (64 x 16); stage 1 the two Dense layers after the boundary and the targets y; plain SGD.
MLP_OWN = [f32(64, 16) + f32(16, 64) + f32(64) + f32(64, 16) + f32(16),
           f32(64, 16) + f32(16, 64) + f32(64) + f32(64, 16) + f32(16)]
MLP_EVERY = 0

# samples/pipeline_transformer.smp: stage 0 the attention block (wq, wk, wv, wo 16 x 16, ln1's
# g and b of 16, pos 8 x 16), stage 1 the MLP (w1 16 x 32, b1 32, w2 32 x 16, b2 16) and ln2;
# each parameter with AdamW's two moments. Both read the tokens (i32 8 x 9), the tied
# embedding emb (16 x 16; its update, from both stages' gradients, runs on the host) and the
# step count (i32).
TRANSFORMER_OWN = [3 * (4 * f32(16, 16) + 2 * f32(16) + f32(8, 16)),
                   3 * (f32(16, 32) + f32(32) + f32(32, 16) + f32(16) + 2 * f32(16))]
TRANSFORMER_EVERY = 4 * 8 * 9 + f32(16, 16) + 4

# (program, its arguments, devices, bytes each group keeps alone, bytes every rank keeps, layouts)
PROGRAMS = [
    ("samples/pipeline_mlp.smp", [], 2, MLP_OWN, MLP_EVERY, [(2, 1)]),
    ("samples/pipeline_transformer.smp", ["--steps=2"], 8, TRANSFORMER_OWN, TRANSFORMER_EVERY, [(2, 4), (8, 1)]),
]


def kept_by_groups(out):
    """Per group, (kept, of all operands) from --stats=pipeline."""
    return [(int(k), int(t)) for k, t in re.findall(r"its ranks keep (\d+) of the operands' (\d+) bytes", out)]


def kept_by_ranks(err):
    """Per rank, the bytes it held at most for values its pipeline group alone keeps."""
    held = {}
    for rank, n in re.findall(r"rank (\d+): host values kept by the rank's pipeline group alone: at most (\d+) bytes",
                              err):
        held[int(rank)] = int(n)
    return held


def run(exe, src, args, ranks, per_rank, tmp):
    workdir = tempfile.mkdtemp(dir=tmp)
    golden.link_data(src, workdir)
    cmd = checks.MPIRUN + ["-np", str(ranks), exe] + args + ["--stats=pipeline"]
    if per_rank > 1:
        cmd.append("--devices-per-rank=%d" % per_rank)
    env = dict(os.environ, SHMAP_LOG_RANKS="1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=workdir, env=env)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    strip = lambda s: s.split("== pipeline stats")[0]  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        for program, args, devices, own, every, layouts in PROGRAMS:
            src = os.path.join(ROOT, program)
            name = os.path.basename(program)
            threaded_exe, mpi_exe = os.path.join(tmp, "threaded"), os.path.join(tmp, "mpi")
            subprocess.run([a.shmapc, "compile", src, "-o", threaded_exe], check=True)
            subprocess.run([a.shmapc, "compile", src, "--mpi", "-o", mpi_exe], check=True)
            t = golden.run_program(threaded_exe, src, args, tempfile.mkdtemp(dir=tmp))
            expect("%s: the threaded run" % name, t.returncode == 0, t.stderr)
            want = [(own[g] + every, sum(own) + every) for g in range(len(own))]
            one = run(mpi_exe, src, args, 1, devices, tmp)
            whole = kept_by_ranks(one.stderr).get(0)
            expect("%s on one rank: it keeps every group's values (%s bytes)" % (name, whole),
                   one.returncode == 0 and whole, one.stderr[-2000:])
            for ranks, per_rank in layouts:
                r = run(mpi_exe, src, args, ranks, per_rank, tmp)
                what = "%s on %d ranks x %d" % (name, ranks, per_rank)
                expect("%s: the threaded run's output" % what, r.returncode == 0 and strip(r.stdout) == strip(t.stdout),
                       r.stdout[-2000:] + r.stderr[-2000:])
                got = kept_by_groups(r.stdout + r.stderr)
                expect("%s: each group's ranks keep its own operands and the shared ones: %s" % (what, want),
                       got == want, "got %s" % got)
                held = kept_by_ranks(r.stderr)
                group_ranks = ranks // len(own)
                per_group = [sorted({held.get(q) for q in range(g * group_ranks, (g + 1) * group_ranks)})
                             for g in range(len(own))]
                expect("%s: every rank of a group measures the same bytes kept for its group alone: %s"
                       % (what, per_group), all(len(p) == 1 and p[0] for p in per_group), r.stderr[-2000:])
                if whole and all(len(p) == 1 and p[0] for p in per_group):
                    measured = [p[0] for p in per_group]
                    expect("%s: each group's ranks keep less than one process (%s < %d)" % (what, measured, whole),
                           all(m < whole for m in measured))
                    expect("%s: the groups' kept bytes add up to one process's, none kept twice (%d == %d)"
                           % (what, sum(measured), whole), sum(measured) == whole)
    print("%d failed" % len(FAILED) if FAILED else "all passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
