#!/usr/bin/env python3
"""The golden run tests under mpirun: every program of samples/ and tests/run/ is
compiled twice, for the threaded runtime and with `shmapc compile --mpi`. The threaded run's
output is compared with PROG.expected as the golden test compares it (tests/golden.py: float
values within the tolerance for other CPUs' matmul kernels); the MPI runs must print exactly
what the threaded run of the same program on this machine printed, byte for byte (the ranks
reduce in the same member order as one process, docs/runtime.md), in two layouts,

  one device per rank       mpirun -np N prog            (N = the mesh's device count)
  several devices per rank  mpirun -np N/D prog --devices-per-rank=D
                            (D = the smallest divisor of N above 1), over TCP
                            (--mca btl self,tcp: the network path, not shared memory)

and a pipeline's program also on one rank, mpirun -np 1 prog --devices-per-rank=N (each device
group's stage program on a thread of that rank, its stage shmaps' devices all there).

A program without a mesh runs on 2 ranks. A program whose meshes have different device counts
cannot run as one job layout (docs/runtime.md): it must stop at start-up on as many ranks as
its smallest mesh has devices, naming a mesh that does not fit. A program expected to fail must print
the same output and fail too; each `shmap runtime error:` message of the threaded run must
come from a rank (`shmap runtime error: rank R: ...`).

--max-tag=T runs them with SHMAP_MPI_MAX_TAG=T: a pipeline's messages use tags 0..T, the channels
beyond on further communicators (the path of pipelines with more channels than MPI has tags),
which must give the same output.

--max-message=B runs the programs with SHMAP_MPI_MAX_MESSAGE=B: every transfer between ranks
larger than B bytes goes as messages of at most B bytes (the path of transfers too large for
one MPI call, over 2^31 - 1 bytes), which must give the same output.

    python3 tests/mpi/run_golden.py --shmapc build/compiler/shmapc [--max-message=B] [--max-tag=T] [PROGRAMS...]"""
import argparse
import difflib
import glob
import math
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

# (the ranks compare every collective before running it)
MPIRUN = checks.MPIRUN + ["-x", "SHMAP_CHECK_COLLECTIVES=1"]


def mesh_sizes(path, seen=None):
    """The device counts of the meshes the program and the modules it imports declare. A
    pipeline placing its stages on meshes (placement=(a, b)) runs on their devices together:
    their sum, in place of theirs (its meshes are used by its stages alone here)."""
    seen = seen if seen is not None else set()
    seen.add(os.path.abspath(path))
    text = open(path).read()
    declared = {name: math.prod(int(n) for n in re.findall(r"=\s*(\d+)", axes)) if axes.strip() else 1
                for name, axes in re.findall(r"^\s*mesh\s+(\w+)\s*=\s*<\[(.*?)\]>", text, re.M)}
    grouped = set()
    sums = set()
    for placed in re.findall(r"placement\s*=\s*\(([^)]*)\)", text):
        names = list(dict.fromkeys(re.findall(r"[A-Za-z_]\w*", placed)))
        if names:
            grouped |= set(names)
            sums.add(sum(declared[n] for n in names if n in declared))
    sizes = {n for name, n in declared.items() if name not in grouped} | sums
    for name in re.findall(r"^\s*import\s+([\w.]+)\s*;", text, re.M):
        for folder in (os.path.dirname(path), os.path.join(ROOT, "stdlib")):
            module = os.path.join(folder, *name.split(".")) + ".smp"
            if os.path.exists(module) and os.path.abspath(module) not in seen:
                sizes |= mesh_sizes(module, seen)
                break
    return sizes


def layouts(path):
    """(ranks, devices per rank, extra mpirun flags) for each run, or None: no layout fits."""
    sizes = mesh_sizes(path)
    if not sizes:
        return [(2, 1, []), (1, 1, ["--mca", "btl", "self,tcp"])]
    if len(sizes) > 1:
        return None
    n = sizes.pop()
    runs = [(n, 1, [])]
    d = next((k for k in range(2, n + 1) if n % k == 0), None)
    runs.append((n // d, d, ["--mca", "btl", "self,tcp"]) if d else (1, 1, ["--mca", "btl", "self,tcp"]))
    if "@pipeline" in open(path).read() and n // d > 1:  # (one rank running every device group)
        runs.append((1, n, ["--mca", "btl", "self,tcp"]))
    return runs


def check_refused(shmapc, path):
    """A program whose meshes differ in size runs on no job layout: started on as many ranks
    as its smallest mesh has devices, it stops before it runs, saying why."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "prog")
        subprocess.run([shmapc, "compile", path, "--mpi", "-o", exe] + golden.compile_flags(path), check=True,
                       capture_output=True, timeout=300)
        ranks = min(mesh_sizes(path))
        r = subprocess.run(MPIRUN + ["-np", str(ranks), exe] + golden.program_args(path), capture_output=True,
                           text=True, timeout=120, cwd=tmp)
        # Said once (rank 0), with status 2.
        want = re.compile(r"shmap runtime error: the mesh has (\d+) devices, but the job runs %d ranks x 1 "
                          r"devices per rank = %d: start it with mpirun -np R and --devices-per-rank=D" % (ranks, ranks))
        m = want.search(r.stderr)
        if (r.returncode == 2 and r.stdout == "" and m and int(m.group(1)) in mesh_sizes(path) and
                r.stderr.count("shmap runtime error") == 1):
            return []
        return ["meshes of different sizes on %d ranks: status %d, expected a refusal at start-up\nstdout:\n%s"
                "stderr:\n%s" % (ranks, r.returncode, r.stdout, r.stderr[-2000:])]


def check_threaded(shmapc, path):
    """Runs the threaded build: (its CompletedProcess, problems). Its output must match the
    expected file (within the golden test's tolerance for floats)."""
    with golden.Compiled(shmapc, path) as c:
        if c.error:
            return None, ["threaded: " + c.error]
        r = c.run()
    expected_path = os.path.splitext(path)[0] + ".expected"
    expected = open(expected_path).read()
    if golden.harness_failure(expected):
        return r, ["%s holds harness failure text: %r" % (expected_path, golden.harness_failure(expected))]
    cmp = golden.compare_outputs(expected, golden.run_output(r))
    if not cmp.ok:
        return r, ["threaded run: output differs from %s beyond the tolerance:\n  %s" % (
            expected_path, "\n  ".join(cmp.problems))]
    return r, []


def check(shmapc, path):
    runs = layouts(path)
    if runs is None:
        return check_refused(shmapc, path)
    threaded, problems = check_threaded(shmapc, path)
    if threaded is None:
        return problems
    messages = [line for line in threaded.stderr.splitlines() if line] if threaded.returncode != 0 else []
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "prog")
        c = subprocess.run([shmapc, "compile", path, "--mpi", "-o", exe] + golden.compile_flags(path),
                           capture_output=True, text=True, timeout=300)
        if c.returncode != 0:
            return problems + ["compile failed: " + c.stderr]
        for ranks, per_rank, flags in runs:
            cmd = MPIRUN + flags + ["-np", str(ranks), exe] + golden.program_args(path)
            if per_rank > 1:
                cmd.append("--devices-per-rank=%d" % per_rank)
            workdir = tempfile.mkdtemp(dir=tmp)
            golden.link_data(path, workdir)
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=workdir)
            layout = "%d ranks x %d devices%s" % (ranks, per_rank, " over TCP" if flags else "")
            if r.stdout != threaded.stdout or (r.returncode != 0) != (threaded.returncode != 0):
                problems.append("%s: status %d (threaded: %d); stdout must be the threaded run's, byte for byte\n%s%s"
                                % (layout, r.returncode, threaded.returncode,
                                   "".join(difflib.unified_diff(threaded.stdout.splitlines(True),
                                                                r.stdout.splitlines(True), "threaded", "mpi")),
                                   r.stderr[-2000:]))
                continue
            for m in messages:
                prefix = "shmap runtime error: "
                ranked = re.escape(prefix) + r"rank \d+: " + re.escape(m[len(prefix):]) if m.startswith(prefix) else None
                if ranked and not re.search(ranked, r.stderr):
                    problems.append("%s: no rank reported: %s\nstderr:\n%s" % (layout, m, r.stderr[-2000:]))
        return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("--max-message", type=int)
    ap.add_argument("--max-tag", type=int)
    ap.add_argument("programs", nargs="*")
    a = ap.parse_args()
    if a.max_message:
        MPIRUN.extend(["-x", "SHMAP_MPI_MAX_MESSAGE=%d" % a.max_message])
    if a.max_tag:
        MPIRUN.extend(["-x", "SHMAP_MPI_MAX_TAG=%d" % a.max_tag])
    shmapc = os.path.abspath(a.shmapc)
    os.chdir(ROOT)
    progs = a.programs or golden.run_programs()
    failed, refused = [], []
    for p in progs:
        if layouts(p) is None:
            refused.append(p)
        problems = check(shmapc, p)
        if problems:
            failed.append(p)
            print("FAIL %s\n%s" % (p, "\n".join(problems)))
    print("%d programs under mpirun: %d passed (%d of them refused at start-up as they should be, their meshes "
          "differing in size: %s), %d failed" % (len(progs), len(progs) - len(failed), len(refused),
                                                 " ".join(refused) or "none", len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
