#!/usr/bin/env python3
"""Under MPI a pipeline's message reaches each rank of the receiving device group as only the
elements that rank's devices read, each from one rank of the sending group that holds it
(runtime/reshard.h): no gather inside the sending group, no element twice to a rank, and a
reshard where the two stages' layouts differ.

For each program below and each job layout (8 ranks of 1 device, 4 of 2, 2 of 4: a device
group of 4 devices, data=2 x model=2, on 4, 2 or 1 ranks), the point_to_point bytes --stats
counts must be the optimum worked out here from the layouts alone: every message is an array
the threaded run sends once, whole (its --stats bytes, W in all); a receiving rank needs the
part of it its devices' blocks cover (rank j runs the group's devices j*4/R .. (j+1)*4/R - 1,
row-major over (data, model)), so a message costs W_message x the sum of those parts over the
group's R ranks. Half of each program's bytes are activations forward, half their cotangents
backward (the same shapes), each read in the receiving stage's in_spec:

- samples/pipeline_transformer.smp: forward and backward both P("data", None, None): each rank
  of one device needs half (sum 2 on 4 ranks), a rank of a data row's two devices half (sum 1
  on 2 ranks), one rank all: 2W, W, W (before: every rank of the group got it whole, from a
  sending group that had gathered it: 4W, 2W, W);
- tests/run/pipeline_shmaps.smp: forward P("data", "model") (stage 0 writes P("data", None): a
  reshard; a device needs a quarter: sum 1 however the ranks lie), backward P("data", None)
  (stage 1's cotangent comes as P("data", "model"): the reshard back): 1.5W, W, W.

The programs' output under MPI equals the threaded run's (as tests/mpi/run_golden.py checks for
every program).

    python3 tests/mpi/pipeline_messages.py --shmapc build/compiler/shmapc
"""
import argparse
import itertools
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

MESH = (("data", 2), ("model", 2))  # a device group: the mesh without its stage axis

# (program, its arguments, [(receiving in_spec, share of the threaded bytes)])
PROGRAMS = [
    ("samples/pipeline_transformer.smp", ["--steps=2"],
     [(("data", None, None), 0.5), (("data", None, None), 0.5)]),
    ("tests/run/pipeline_shmaps.smp", [], [(("data", "model"), 0.5), (("data", None), 0.5)]),
]
LAYOUTS = [(8, 1), (4, 2), (2, 4)]


def part_read(spec, ranks, j):
    """The part of an array (0..1) that rank j of a group on `ranks` ranks reads in `spec`."""
    sizes = dict(MESH)
    per = 4 // ranks
    devices = list(itertools.product(*[range(n) for _, n in MESH]))[j * per:(j + 1) * per]
    # the union of the devices' blocks, on a grid of the spec's pieces per dimension
    cells = set()
    for coords in devices:
        at = dict(zip([a for a, _ in MESH], coords))
        ranges = [[at[axis]] if axis else list(range(1)) for axis in spec]
        for cell in itertools.product(*ranges):
            cells.add(cell)
    total = 1
    for axis in spec:
        total *= sizes[axis] if axis else 1
    return len(cells) / total


def stats_bytes(out):
    m = re.search(r"^point_to_point\s+(\d+)\s+(\d+)\s+(\d+)", out, re.M)
    return (int(m.group(2)), int(m.group(3))) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for program, args, messages in PROGRAMS:
            src = os.path.join(ROOT, program)
            name = os.path.basename(program)
            threaded_exe, mpi_exe = os.path.join(tmp, "threaded"), os.path.join(tmp, "mpi")
            subprocess.run([a.shmapc, "compile", src, "-o", threaded_exe], check=True)
            subprocess.run([a.shmapc, "compile", src, "--mpi", "-o", mpi_exe], check=True)
            t = golden.run_program(threaded_exe, src, args + ["--stats"], tempfile.mkdtemp(dir=tmp))
            whole = stats_bytes(t.stdout + t.stderr)
            expect("%s: the threaded run sends its messages whole" % name, t.returncode == 0 and whole, t.stderr)
            if not whole:
                continue
            w = whole[0]
            for ranks, per_rank in LAYOUTS:
                group_ranks = ranks // 2
                want = round(sum(share * w * sum(part_read(spec, group_ranks, j) for j in range(group_ranks))
                                 for spec, share in messages))
                workdir = tempfile.mkdtemp(dir=tmp)
                golden.link_data(src, workdir)
                cmd = checks.MPIRUN + ["-np", str(ranks), mpi_exe] + args + ["--stats"]
                if per_rank > 1:
                    cmd.append("--devices-per-rank=%d" % per_rank)
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=workdir)
                got = stats_bytes(r.stdout + r.stderr)
                expect("%s on %d ranks x %d: each receiving rank gets only what its devices read: %d bytes sent "
                       "and received (W = %d)" % (name, ranks, per_rank, want, w),
                       r.returncode == 0 and got == (want, want), "got %s\n%s" % (got, r.stderr[-2000:]))
                # the same output as the threaded run, less the --stats table
                strip = lambda s: s.split("== shmap collective stats")[0]  # noqa: E731
                expect("%s on %d ranks x %d: the threaded run's output" % (name, ranks, per_rank),
                       strip(r.stdout) == strip(t.stdout), r.stdout[-2000:])
    print("%d failed" % len(FAILED) if FAILED else "all passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
