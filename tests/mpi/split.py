#!/usr/bin/env python3
"""What moves between MPI ranks (docs/runtime.md, "Several processes"), checked with
SHMAP_LOG_RANKS=1, on which each rank reports every file it loads (bytes read of the file's),
every shmap's outputs (whole on the rank, kept split, or shared and the bytes received) and,
with several devices per rank, what each collective sends and receives:

  tests/run/stays_split.smp   each case of the analysis (compiler/forms/HostForms.cpp) on a
                              2 x 2 mesh, as 4 ranks and as 2 ranks of 2 devices: its output
                              is its .expected file, and rank 1 reports what the comments of
                              EXPECTED below derive.
  tests/run/ranked_collectives.smp  collectives within a rank and across ranks, on 2 ranks
                              of 2 devices: each piece crosses to a rank once, each group
                              moving its own (RANKED_EXPECTED),
                              and with --reduce-locally-first a rank's sum instead of each
                              member's input (RANKED_LOCALLY_FIRST).
  samples/fsdp.smp            fully sharded training: nothing received in the loop
  tests/mpi/blocks_held.smp   the bytes a rank holds as blocks (its comments derive them):
                              a quarter of each value on 4 ranks, half on 2 ranks of 2
  tests/mpi/checkpoint_resume.smp  a sharded checkpoint written by 4 ranks (each archive its
                              rank's blocks), put together as numpy would (the same bytes as
                              savez of the whole arrays), resumed on 2 ranks of 2 devices and
                              on one process of 4 threads with the losses of a run without a
                              stop; a truncated archive refused by name
  samples/sharded_layers.smp  stacked layers (tensor-parallel, replicated over "data"): a
                              checkpoint written by 4 ranks (ranks 0 and 1 hold every block),
                              resumed on 2 ranks of 2 and on one process: the unbroken run's
                              losses and weights
  samples/transformer.smp     data-parallel (and tensor-parallel) training on 4 ranks, each
                              reading its rows of the token file (144 of 288 bytes), the
                              forward shmap's residuals kept split for the backward shmap;
                              its losses are the threaded run's, printed byte for byte.

    python3 tests/mpi/split.py --shmapc build/compiler/shmapc"""
import argparse
import ast
import os
import re
import shutil
import struct
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
# brings a rank each block it does not hold: with variance checking a rank holds the block of
# each of its devices, so rank 1 lacks 1 of 2; without it (doubled_unchecked) only the block
# of a writer (the device at y = 0), so on 4 ranks rank 1 lacks both.
def stays_split_expected(ranks):
    kept = outputs(0, 1, 0, 0)
    sums = outputs(0, 0, 1, 16)
    rows = outputs(0, 0, 1, 64)
    unchecked = outputs(0, 0, 1, 128 if ranks == 4 else 64)
    return [
        "load data/grid_8x4.npy: 64 of 128 bytes (1 blocks)",  # only shmaps read it, as rows over x
        kept, sums,        # d = doubled(grid), read as rows over x by row_sums; its sums printed
        rows,              # e = doubled(grid): host code reads e[7]
        rows,              # f = doubled(grid), read in two layouts
    ] + ([] if ranks == 4 else [
        # total(f)'s psum of one f32 (4 bytes) over a group of 4, 2 on each rank: member 3
        # (here) reduces it from the others' inputs, then sends it to rank 0
        "psum, devices 0,1,2,3: input chunks: 0 bytes sent, 8 received",
        "psum, devices 0,1,2,3: reduced chunks: 4 bytes sent, 0 received",
    ]) + [
        outputs(1, 0, 0, 0),  # total(f): a replicated scalar, on every rank
        sums,              # row_sums(f)
        # g, passed to a while loop's row_sums three times: each step's sums and the carry
        # acc + sums (added on the devices) stay split, and acc is gathered once, after the loop
        kept, kept, kept, kept, kept, kept, kept, sums,
        kept, sums,        # h, passed to both branches of an if
        unchecked, sums,   # doubled_unchecked: the block of y = 0 only, so shared
    ]


# ranked_collectives.smp on 2 ranks of 2 devices, rank 1 (devices x = 1, y = 0 and 1: ids 2
# and 3), f32[8] (32 bytes) a device. A group with members on both ranks moves its own data, on
# its own (one line each, "psum, devices 0,2: ..."); a group within a rank moves nothing and
# says nothing. An all-reduce moves chunk r of each member's input to member r's rank (each
# member's own, unreduced: one process adds them in member order, and so must the ranks for the
# same bits), then each reduced chunk once to each other rank of its group; all_gather each
# input once to each other rank of its group.
RANKED_EXPECTED = [
    # psum over y: both members of each group on one rank, nothing moves (no line)
    # over x: groups 0,2 and 1,3, a member on each rank; each member sends the other its half
    # (16 bytes) and then its reduced half
    "psum, devices 0,2: input chunks: 16 bytes sent, 16 received",
    "psum, devices 0,2: reduced chunks: 16 bytes sent, 16 received",
    "psum, devices 1,3: input chunks: 16 bytes sent, 16 received",
    "psum, devices 1,3: reduced chunks: 16 bytes sent, 16 received",
    # over both: one group of 4; each member here sends the other rank's 2 members a quarter
    # (8 bytes) each; the 2 chunks reduced here (8 bytes each) go to rank 0 once
    "psum, devices 0,1,2,3: input chunks: 32 bytes sent, 32 received",
    "psum, devices 0,1,2,3: reduced chunks: 16 bytes sent, 16 received",
    # all_gather over x: each input once to the other rank
    "all_gather, devices 0,2: inputs: 32 bytes sent, 32 received",
    "all_gather, devices 1,3: inputs: 32 bytes sent, 32 received",
    outputs(3, 0, 1, 32),  # the psum over y is split over x: rank 0's block (32 bytes) comes here
    # psum_scatter and all_to_all over x: member 0 (on rank 0) reads a half (16 bytes) of each
    # input here, member 1 (here) a half of each there
    "psum_scatter, devices 0,2: inputs: 16 bytes sent, 16 received",
    "all_to_all, devices 0,2: inputs: 16 bytes sent, 16 received",
    # ppermute over x: each input (32 bytes) to the member it goes to, on the other rank
    "ppermute, devices 0,2: inputs: 32 bytes sent, 32 received",
    "psum_scatter, devices 1,3: inputs: 16 bytes sent, 16 received",
    "all_to_all, devices 1,3: inputs: 16 bytes sent, 16 received",
    "ppermute, devices 1,3: inputs: 32 bytes sent, 32 received",
    # the three are split over both axes: rank 0's two blocks of each (16, 32, 32 bytes) come here
    outputs(0, 0, 3, 2 * (16 + 32 + 32)),
]


# With --reduce-locally-first rank 1 sends, for the psum over both axes, chunks 0 and 1 (8 bytes
# each) of the sum of its 2 members, not of each: half the bytes. Groups with one member on
# a rank move what they did.
RANKED_LOCALLY_FIRST = [line.replace(": input chunks:", ": input chunks added up on their rank:")
                        for line in RANKED_EXPECTED]
RANKED_LOCALLY_FIRST[4] = "psum, devices 0,1,2,3: input chunks added up on their rank: 16 bytes sent, 16 received"


def rank_lines(r, rank, blocks=False):
    """Rank `rank`'s report lines, from its own copy of its standard error (mpirun's
    --output-filename): in mpirun's merged stream a rank's output arrives in chunks that need
    not end at a line's end, so under load one rank's line can be cut by another's."""
    prefix = "shmap ranks: rank %d: " % rank
    with open(os.path.join(r.logs, "1", "rank.%d" % rank, "stderr")) as f:
        lines = [l[len(prefix):] for l in f.read().splitlines() if l.startswith(prefix)]
    # (the bytes a rank held as blocks, its last line: only blocks_held's check reads it)
    return [l for l in lines if blocks or not l.startswith("host values kept as blocks")]


def by_group(lines):
    """The lines of a rank, with each shmap call's collective lines grouped by their group (in
    each group's own order, which its one thread keeps; the rank's groups run at the same time,
    so their lines may interleave in any order)."""
    out, call = [], []
    for line in lines + [None]:
        if line is None or line.startswith("a shmap's"):
            out += sorted(call, key=lambda l: l.split(":")[0].split(", devices ")[-1])
            call = []
            if line is not None:
                out.append(line)
        else:
            call.append(line)
    return out


def npy_member(path, member):
    """(shape, data bytes) of a stored .npy member of an .npz archive, read as numpy reads it."""
    import zipfile
    raw = zipfile.ZipFile(path).read(member + ".npy")
    assert raw[:6] == b"\x93NUMPY"
    n = struct.unpack("<H", raw[8:10])[0]
    head = ast.literal_eval(raw[10:10 + n].decode("latin1"))
    assert head["descr"] == "<f4" and not head["fortran_order"]
    return tuple(head["shape"]), raw[10 + n:]


def assembled(folder, key):
    """The array `key` of a checkpoint put together from its blocks (docs/runtime.md's recipe,
    without numpy): float32, row-major."""
    import json
    index = json.load(open(os.path.join(folder, "index.json")))
    arr = [a for a in index["arrays"] if a["key"] == key][0]
    rows, cols = arr["shape"]
    out = bytearray(rows * cols * 4)
    for b in arr["blocks"]:
        shape, data = npy_member(os.path.join(folder, b["file"]), b["member"])
        r0, c0 = b["start"]
        for r in range(shape[0]):
            at = ((r0 + r) * cols + c0) * 4
            out[at:at + shape[1] * 4] = data[r * shape[1] * 4:(r + 1) * shape[1] * 4]
    return bytes(out)


def resumed(a, tmp, src, exe, ck, steps, want, label, what):
    """Resumes checkpoint `ck` (a copy of it each time) for `steps` steps on 2 ranks of 2 devices
    and on one process of 4 threads (`exe`): each prints `want`."""
    for name, ranks, per_rank in (("2 ranks x 2", 2, 2), ("one process of 4 threads", 1, 4)):
        copy = os.path.join(tmp, "%s_%s" % (os.path.basename(ck), name.replace(" ", "_")))
        shutil.copytree(ck, copy)
        args = ["--steps=%d" % steps, "--ckpt=" + copy, "--resume=true"]
        if ranks > 1:
            got = run(a, tmp, src, ranks, per_rank, args)
        else:
            got = subprocess.run([exe] + args, capture_output=True, text=True, timeout=300, cwd=tmp)
        expect("%s resumed on %s: %s" % (label, name, what),
               got.returncode == 0 and got.stdout.splitlines() == want, got.stdout + got.stderr)


def checkpoint(a, tmp):
    src = os.path.join(ROOT, "tests", "mpi", "checkpoint_resume.smp")
    exe = os.path.join(tmp, "checkpoint_resume")
    subprocess.run([a.shmapc, "compile", src, "-o", exe], check=True)
    straight = subprocess.run([exe, "--steps=6", "--ckpt=" + os.path.join(tmp, "straight")], capture_output=True,
                              text=True, timeout=300, cwd=tmp)
    lines = straight.stdout.splitlines()
    expect("checkpoint_resume: 6 steps in one process", straight.returncode == 0 and len(lines) == 12,
           straight.stdout + straight.stderr)
    ck = os.path.join(tmp, "ck")
    r = run(a, tmp, src, 4, 1, ["--steps=3", "--ckpt=" + ck, "--whole=true"])
    expect("checkpoint_resume on 4 ranks: steps 1-3", r.returncode == 0 and r.stdout.splitlines() == lines[:6],
           r.stdout + r.stderr)
    files = sorted(f for f in os.listdir(ck))
    expect("checkpoint_resume on 4 ranks: an index and one archive per rank",
           files == ["index.json", "rank-0-1.npz", "rank-1-1.npz", "rank-2-1.npz", "rank-3-1.npz"], str(files))
    import zipfile
    # each weight, and each moment, is split 4 ways, one block per device: every rank writes one
    # block of each of the 6 (params, mu and nu of w1 and w2), rank 0 the step count too
    members = [len(zipfile.ZipFile(os.path.join(ck, "rank-%d-1.npz" % k)).namelist()) for k in range(4)]
    expect("checkpoint_resume on 4 ranks: each rank wrote its blocks once", members == [7, 6, 6, 6], str(members))
    whole = r.logs.rsplit("/rank_output", 1)[0]  # (the run's folder: savez wrote whole.npz there)
    for key in ("params.w1", "params.w2"):
        _, want = npy_member(os.path.join(whole, "whole.npz"), key)
        expect("checkpoint_resume: %s put together from its blocks is savez's" % key, assembled(ck, key) == want)
    resumed(a, tmp, src, exe, ck, 3, lines[6:], "checkpoint_resume", "steps 4-6 as without a stop")
    broken = os.path.join(tmp, "ck_truncated")
    shutil.copytree(ck, broken)
    path = os.path.join(broken, "rank-2-1.npz")
    os.truncate(path, os.path.getsize(path) // 2)
    got = subprocess.run([exe, "--steps=3", "--ckpt=" + broken, "--resume=true"], capture_output=True, text=True,
                         timeout=300, cwd=tmp)
    expect("checkpoint_resume: a truncated archive is refused by name",
           got.returncode == 2 and got.stdout == "" and "rank-2-1.npz" in got.stderr and "truncated" in got.stderr,
           got.stdout + got.stderr)
    with open(os.path.join(broken, "index.json"), "w") as f:  # cut short in the middle of a string
        f.write('{"format": "shmapc checkpoint", "generation": 1, "arrays": [{"key": "params.w1", "dty')
    got = subprocess.run([exe, "--steps=3", "--ckpt=" + broken, "--resume=true"], capture_output=True, text=True,
                         timeout=300, cwd=tmp)
    expect("checkpoint_resume: a corrupt index is refused by name",
           got.returncode == 2 and got.stdout == "" and "index.json: not a checkpoint index" in got.stderr,
           got.stdout + got.stderr)


def sharded_layers(a, tmp):
    src = os.path.join(ROOT, "samples", "sharded_layers.smp")
    exe = os.path.join(tmp, "sharded_layers")
    subprocess.run([a.shmapc, "compile", src, "-o", exe], check=True)
    straight = subprocess.run([exe, "--steps=4", "--ckpt=" + os.path.join(tmp, "layers_straight")],
                              capture_output=True, text=True, timeout=300, cwd=tmp)
    lines = straight.stdout.splitlines()
    expect("sharded_layers: 4 steps in one process", straight.returncode == 0 and len(lines) == 12, straight.stdout)
    ck = os.path.join(tmp, "layers_ck")
    r = run(a, tmp, src, 4, 1, ["--steps=2", "--ckpt=" + ck])
    expect("sharded_layers on 4 ranks: steps 1-2", r.returncode == 0 and r.stdout.splitlines()[:4] == lines[:4],
           r.stdout + r.stderr)
    # each weight and moment has 2 blocks (split over "model" only), first held by devices 0
    # and 1: ranks 0 and 1 write them (rank 0 the step count too), ranks 2 and 3 nothing
    files = sorted(os.listdir(ck))
    expect("sharded_layers on 4 ranks: archives of ranks 0 and 1 only",
           files == ["index.json", "rank-0-1.npz", "rank-1-1.npz"], str(files))
    resumed(a, tmp, src, exe, ck, 2, lines[4:], "sharded_layers", "steps 3-4 and the weights as without a stop")


def run(a, tmp, src, ranks, per_rank, args=()):
    exe = os.path.join(tmp, os.path.basename(src)[:-4] + "_mpi")
    if not os.path.exists(exe):
        subprocess.run([a.shmapc, "compile", src, "--mpi", "-o", exe], check=True)
    workdir = tempfile.mkdtemp(dir=tmp)
    golden.link_data(src, workdir)
    logs = os.path.join(workdir, "rank_output")
    cmd = MPIRUN + ["--output-filename", logs, "-np", str(ranks), exe] + list(args)
    if per_rank > 1:
        cmd.append("--devices-per-rank=%d" % per_rank)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=workdir)
    r.logs = logs
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(ROOT, "tests", "run", "stays_split.smp")
        want = open(src[:-4] + ".expected").read()
        for ranks, per_rank in ((4, 1), (2, 2)):
            r = run(a, tmp, src, ranks, per_rank)
            got = rank_lines(r, 1)
            expect("stays_split on %d ranks x %d: output as one process" % (ranks, per_rank),
                   r.returncode == 0 and r.stdout == want, "status %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
            expect("stays_split on %d ranks x %d: what rank 1 keeps, reads and receives" % (ranks, per_rank),
                   got == stays_split_expected(ranks),
                   "got:\n  %s\nwanted:\n  %s" % ("\n  ".join(got), "\n  ".join(stays_split_expected(ranks))))

        # Collectives with several devices per rank: each piece crosses to a rank once.
        src = os.path.join(ROOT, "tests", "run", "ranked_collectives.smp")
        r = run(a, tmp, src, 2, 2)
        got = by_group(rank_lines(r, 1))
        expect("ranked_collectives on 2 ranks x 2: output as one process",
               r.returncode == 0 and r.stdout == open(src[:-4] + ".expected").read(), r.stdout + r.stderr)
        expect("ranked_collectives on 2 ranks x 2: what rank 1 sends and receives", got == by_group(RANKED_EXPECTED),
               "got:\n  %s\nwanted:\n  %s" % ("\n  ".join(got), "\n  ".join(RANKED_EXPECTED)))

        # ... and with the members of a rank added up before they travel.
        r = run(a, tmp, src, 2, 2, ["--reduce-locally-first"])
        got = by_group(rank_lines(r, 1))
        expect("ranked_collectives on 2 ranks x 2, --reduce-locally-first: output as one process (sums of integers)",
               r.returncode == 0 and r.stdout == open(src[:-4] + ".expected").read(), r.stdout + r.stderr)
        expect("ranked_collectives on 2 ranks x 2, --reduce-locally-first: what rank 1 sends and receives",
               got == by_group(RANKED_LOCALLY_FIRST), "got:\n  %s\nwanted:\n  %s" % ("\n  ".join(got), "\n  ".join(RANKED_LOCALLY_FIRST)))

        # The Transformer: the threaded run, then 4 ranks, then 2 ranks of 2 devices.
        src = os.path.join(ROOT, "samples", "transformer.smp")
        exe = os.path.join(tmp, "transformer")
        subprocess.run([a.shmapc, "compile", src, "-o", exe], check=True)
        workdir = tempfile.mkdtemp(dir=tmp)
        threaded = golden.run_program(exe, src, ["--steps=6"], workdir)
        # (its losses as expected within the golden test's tolerance for other CPUs' matmul
        # kernels; the ranks' must then be these, byte for byte)
        vs_expected = golden.compare_outputs(open(src[:-4] + ".expected").read(), threaded.stdout)
        expect("transformer: the threaded run trains",
               threaded.returncode == 0 and vs_expected.ok,
               "\n".join(vs_expected.problems) + threaded.stdout + threaded.stderr)
        steps = 6
        # 18 residuals for the backward shmap (--emit=ir's @loss_fwd: the element-wise ones the
        # backward part can compute from these are remade there) and each device's partial
        # loss, which the backward shmap sums with the gradients (defer-primal-reductions):
        # all 19 split, nothing whole
        forward = outputs(0, 19, 0, 0)
        for ranks, per_rank in ((4, 1), (2, 2)):
            r = run(a, tmp, src, ranks, per_rank, ["--steps=%d" % steps])
            expect("transformer on %d ranks x %d: the threaded run's losses" % (ranks, per_rank),
                   r.returncode == 0 and r.stdout == threaded.stdout,
                   "status %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
            for rank in range(ranks):
                got = rank_lines(r, rank)
                loads = [l for l in got if l.startswith("load ")]
                expect("transformer on %d ranks x %d: rank %d reads its 4 sequences of the token file"
                       % (ranks, per_rank, rank),
                       loads == ["load data/tokens.npy: 144 of 288 bytes (1 blocks)"], "\n".join(got))
                expect("transformer on %d ranks x %d: rank %d keeps the residuals split in every step"
                       % (ranks, per_rank, rank), got.count(forward) == steps, "\n".join(got))

        # FSDP: parameters, gradients and AdamW's moments stay on the devices between steps
        # (the update runs block by block on them), so no rank receives a byte in the training
        # loop; the parameters are gathered once, after it, to be printed.
        src = os.path.join(ROOT, "samples", "fsdp.smp")
        exe = os.path.join(tmp, "fsdp")
        subprocess.run([a.shmapc, "compile", src, "-o", exe], check=True)
        threaded = golden.run_program(exe, src, ["--steps=4"], tempfile.mkdtemp(dir=tmp))
        for ranks, per_rank in ((4, 1), (2, 2)):
            r = run(a, tmp, src, ranks, per_rank, ["--steps=4"])
            expect("fsdp on %d ranks x %d: the threaded run's output" % (ranks, per_rank),
                   r.returncode == 0 and threaded.returncode == 0 and r.stdout == threaded.stdout,
                   "status %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
            for rank in range(ranks):
                got = [l for l in rank_lines(r, rank) if l.startswith("a shmap's")]
                # per step: the forward (its residuals), the backward (the loss whole, the two
                # gradients split) and one AdamW update per weight layout (parameter and
                # moments split); then the two gathers
                step = [outputs(0, 5, 0, 0), outputs(1, 2, 0, 0), outputs(0, 3, 0, 0), outputs(0, 3, 0, 0)]
                gathered = got[len(step) * 4:]
                expect("fsdp on %d ranks x %d: rank %d receives nothing in the training loop" % (ranks, per_rank, rank),
                       got[:len(step) * 4] == step * 4 and len(gathered) == 2 and
                       all(" 1 shared" in l for l in gathered), "\n".join(got))
        src = os.path.join(ROOT, "tests", "mpi", "blocks_held.smp")
        for ranks, per_rank, held in ((4, 1, 4096), (2, 2, 8192)):
            r = run(a, tmp, src, ranks, per_rank)
            # w = 1 - 0.1 * (1 + 1.9 + 2.71) = 0.439 everywhere
            expect("blocks_held on %d ranks x %d: its output" % (ranks, per_rank),
                   r.returncode == 0 and "[0.439, 0.439, 0.439, 0.439]" in r.stdout, r.stdout + r.stderr)
            for rank in range(ranks):
                got = [l for l in rank_lines(r, rank, blocks=True) if l.startswith("host values kept as blocks")]
                expect("blocks_held on %d ranks x %d: rank %d holds %d bytes as blocks" % (ranks, per_rank, rank, held),
                       got == ["host values kept as blocks: at most %d bytes at once" % held], "\n".join(got))
        checkpoint(a, tmp)
        sharded_layers(a, tmp)
    if FAILED:
        print("%d failed" % len(FAILED))
        sys.exit(1)


if __name__ == "__main__":
    main()
