#!/usr/bin/env python3
"""Which MPI calls each collective makes through the MPI backend (`--mpi`, one device per rank):
the one a hand-written MPI program would make where one gives the same bits, once per
collective, and nothing else (bench/mpi measures the speed that follows from it; this checks
the calls, not a time). A PMPI interposer
(count_calls.cpp, LD_PRELOAD) counts each rank's calls; a program runs its collective `steps`
times, so the calls per collective are (count at 3 steps - count at 1 step) / 2, which leaves
out what start-up and output call. On 2 and 4 ranks, f32[1024] per rank:

  psum          on 2 ranks one MPI_Allreduce (two operands: any order gives the same bits);
                on 4, one MPI_Isend to each other member (its chunk of this member's input;
                the member's own chunk is folded where it lies) and one MPI_Allgather of the
                reduced chunks (equal: the length a multiple of the group's size)
  pmax          of floats on 2 ranks, as psum on 4 (MPI's max is not numpy's on a NaN)
  all_gather    one MPI_Allgather, along the first axis, in place
  psum_scatter  one MPI_Isend to each other member, from the input as it lies
  all_to_all    one MPI_Alltoall
  ppermute      one MPI_Sendrecv

(psum on more than 2 ranks and psum_scatter have no hand-written MPI call that gives the same
bits: MPI_Allreduce and MPI_Reduce_scatter_block may add in any order. Point-to-point messages leave out the copy
of the member's own part that Open MPI's MPI_Alltoall makes after the exchange, not beside it.)

    python3 tests/mpi/calls.py --shmapc build/compiler/shmapc --interposer build/tests/libmpi_count_calls.so"""
import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import checks  # noqa: E402

CALLS = ["Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Allreduce", "Isend", "Sendrecv"]
N = 1024


def load_benchmark():
    """bench/mpi/run.py, whose programs (each collective `steps` times in a while loop) this
    counts the calls of: the ones the benchmark times."""
    path = os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench", "mpi", "run.py")
    spec = importlib.util.spec_from_file_location("mpi_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def counts(exe, r, steps, interposer):
    """{rank: {call: count}} of one run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHMAP_")}  # (no --check-collectives)
    p = subprocess.run(checks.MPIRUN + ["-np", str(r), "-x", "LD_PRELOAD=" + interposer, exe, "--steps=%d" % steps],
                       capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        raise RuntimeError("%s --steps=%d on %d ranks failed:\n%s%s" % (exe, steps, r, p.stdout, p.stderr))
    out = {}
    for m in re.finditer(r"^mpi calls: rank (\d+): (.*)$", p.stderr, re.M):
        words = m.group(2).split()
        out[int(m.group(1))] = {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}
    if sorted(out) != list(range(r)):
        raise RuntimeError("the interposer reported for ranks %s, not 0..%d:\n%s" % (sorted(out), r - 1, p.stderr))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("--interposer", required=True)
    a = ap.parse_args()
    expected = {"psum": lambda r: {"Allreduce": 1} if r == 2 else {"Isend": r - 1, "Allgather": 1},
                "pmax": lambda r: {"Isend": r - 1, "Allgather": 1}, "all_gather": lambda r: {"Allgather": 1},
                "psum_scatter": lambda r: {"Isend": r - 1}, "all_to_all": lambda r: {"Alltoall": 1},
                "ppermute": lambda r: {"Sendrecv": 1}}
    program = load_benchmark().program
    with tempfile.TemporaryDirectory() as tmp:
        for kind, want_of in expected.items():
            for r in (2, 4):
                want = want_of(r)
                src = os.path.join(tmp, "%s_%d.smp" % (kind, r))
                with open(src, "w") as f:
                    if kind == "pmax":  # (the psum program with pmax: a float max, not MPI's)
                        f.write(program("psum", r, N).replace('psum(x, "i")', 'pmax(x, "i")'))
                    else:
                        f.write(program(kind, r, N))
                exe = src[:-4]
                subprocess.run([a.shmapc, "compile", src, "--mpi", "-o", exe], check=True)
                one, three = counts(exe, r, 1, a.interposer), counts(exe, r, 3, a.interposer)
                per = {rank: {c: (three[rank][c] - one[rank][c]) / 2 for c in CALLS} for rank in range(r)}
                want_all = {c: want.get(c, 0) for c in CALLS}
                bad = {rank: got for rank, got in per.items() if got != want_all}
                checks.expect("%s on %d ranks: %s per collective" % (kind, r, ", ".join(
                    "%d MPI_%s" % (v, c) for c, v in want.items())), not bad,
                    "calls per collective, by rank: %s" % bad)
    return 1 if checks.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
