#!/usr/bin/env python3
"""Host arrays that only shmaps read stay split across MPI ranks (issue 12; docs/runtime.md,
"Several processes"), checked with SHMAP_LOG_RANKS=1, on which each rank reports every file
it loads (bytes read of the file's) and every shmap's outputs (whole on the rank, kept split,
or shared and the bytes received):

  tests/run/stays_split.smp   each case of the analysis (compiler/codegen/SplitUses.cpp) on a
                              2 x 2 mesh, as 4 ranks and as 2 ranks of 2 devices: its output
                              is its .expected file, and rank 1 reports what the comments of
                              EXPECTED below derive.
  samples/transformer.smp     data-parallel (and tensor-parallel) training on 4 ranks, each
                              reading its rows of the token file (144 of 288 bytes), the
                              forward shmap's residuals kept split for the backward shmap;
                              its losses are the threaded run's, printed byte for byte.

    python3 tests/mpi/split.py --shmapc build/compiler/shmapc"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import golden  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
from checks import FAILED, expect  # noqa: E402

MPIRUN = checks.MPIRUN + ["-x", "SHMAP_LOG_RANKS=1", "-x", "SHMAP_CHECK_COLLECTIVES=1"]


def outputs(whole, split, shared, received):
    return "a shmap's %d outputs: %d whole here, %d stay split, %d shared (%d bytes received)" % (
        whole + split + shared, whole, split, shared, received)


# stays_split.smp's reports on rank 1, by layout (ranks, devices per rank). Rank 1 runs device
# 1 (x = 0, y = 1) on 4 ranks, devices 2 and 3 (x = 1) on 2 ranks. The rows of x are 4 of the
# grid's 8 (64 of its 128 bytes); a block of `doubled` is 64 bytes, of `row_sums` 16. Sharing
# brings a rank the block of each writer (the device at y = 0) of another rank: both writers'
# on 4 ranks, one on 2.
def stays_split_expected(ranks):
    blocks_received = 2 if ranks == 4 else 1
    kept = outputs(0, 1, 0, 0)
    sums = outputs(0, 0, 1, 16 * blocks_received)
    rows = outputs(0, 0, 1, 64 * blocks_received)
    return [
        "load data/grid_8x4.npy: 64 of 128 bytes (1 blocks)",  # only shmaps read it, as rows over x
        kept, sums,        # d = doubled(grid), read as rows over x by row_sums; its sums printed
        rows,              # e = doubled(grid): host code reads e[7]
        rows,              # f = doubled(grid), read in two layouts
        outputs(1, 0, 0, 0),  # total(f): a replicated scalar, on every rank
        sums,              # row_sums(f)
        kept, sums, sums, sums,  # g, passed to a while loop's row_sums three times
        kept, sums,        # h, passed to both branches of an if
        rows, sums,        # doubled_unchecked: the block of y = 0 only, so shared
    ]


def rank_lines(stderr, rank):
    prefix = "shmap ranks: rank %d: " % rank
    return [l[len(prefix):] for l in stderr.splitlines() if l.startswith(prefix)]


def run(a, tmp, src, ranks, per_rank, args=()):
    exe = os.path.join(tmp, os.path.basename(src)[:-4] + "_mpi")
    if not os.path.exists(exe):
        subprocess.run([a.shmapc, "compile", src, "--mpi", "-o", exe], check=True)
    workdir = tempfile.mkdtemp(dir=tmp)
    golden.link_data(src, workdir)
    cmd = MPIRUN + ["-np", str(ranks), exe] + list(args)
    if per_rank > 1:
        cmd.append("--devices-per-rank=%d" % per_rank)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=workdir)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(ROOT, "tests", "run", "stays_split.smp")
        want = open(src[:-4] + ".expected").read()
        for ranks, per_rank in ((4, 1), (2, 2)):
            r = run(a, tmp, src, ranks, per_rank)
            got = rank_lines(r.stderr, 1)
            expect("stays_split on %d ranks x %d: output as one process" % (ranks, per_rank),
                   r.returncode == 0 and r.stdout == want, "status %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
            expect("stays_split on %d ranks x %d: what rank 1 keeps, reads and receives" % (ranks, per_rank),
                   got == stays_split_expected(ranks),
                   "got:\n  %s\nwanted:\n  %s" % ("\n  ".join(got), "\n  ".join(stays_split_expected(ranks))))

        # The Transformer: the threaded run, then 4 ranks, then 2 ranks of 2 devices.
        src = os.path.join(ROOT, "samples", "transformer.smp")
        exe = os.path.join(tmp, "transformer")
        subprocess.run([a.shmapc, "compile", src, "-o", exe], check=True)
        workdir = tempfile.mkdtemp(dir=tmp)
        threaded = golden.run_program(exe, src, ["--steps=6"], workdir)
        expect("transformer: the threaded run trains",
               threaded.returncode == 0 and threaded.stdout == open(src[:-4] + ".expected").read(),
               threaded.stdout + threaded.stderr)
        steps = 6
        forward = outputs(1, 33, 0, 0)  # the loss (replicated); 33 residuals for the backward shmap
        for ranks, per_rank in ((4, 1), (2, 2)):
            r = run(a, tmp, src, ranks, per_rank, ["--steps=%d" % steps])
            expect("transformer on %d ranks x %d: the threaded run's losses" % (ranks, per_rank),
                   r.returncode == 0 and r.stdout == threaded.stdout,
                   "status %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
            for rank in range(ranks):
                got = rank_lines(r.stderr, rank)
                loads = [l for l in got if l.startswith("load ")]
                expect("transformer on %d ranks x %d: rank %d reads its 4 sequences of the token file"
                       % (ranks, per_rank, rank),
                       loads == ["load data/tokens.npy: 144 of 288 bytes (1 blocks)"], "\n".join(got))
                expect("transformer on %d ranks x %d: rank %d keeps the residuals split in every step"
                       % (ranks, per_rank, rank), got.count(forward) == steps, "\n".join(got))
    if FAILED:
        print("%d failed" % len(FAILED))
        sys.exit(1)


if __name__ == "__main__":
    main()
