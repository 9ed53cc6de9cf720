#!/usr/bin/env python3
"""Failures under mpirun end the whole job with a message naming the rank, never a
hang (each job has a deadline here):

  one rank fails     tests/mpi/one_rank_fails.smp: only device 1 indexes out of range; rank 0
                     waits for it in a psum. Status 2, rank 1's message, the output before it.
  a rank is killed   tests/mpi/long_loop.smp runs psums; rank 1's process gets SIGKILL. mpirun
                     ends with a non-zero status and names rank 1.
  a wrong layout     samples/psum.smp (a mesh of 4) on 3 ranks stops before it runs: status
                     2, one message (from rank 0), no MPI_Abort report; --devices-per-rank=0
                     is refused.
  pipeline groups    tests/run/pipeline_meshes.smp (groups of 4 and 2 devices) on 2 ranks of 3
                     devices: a rank would span both groups; status 2 and what to do.
  mismatch           tests/mpi/mismatch.cpp runs psum on rank 0 and pmax on rank 1; with
                     --check-collectives the job stops with both named.
  groups differ      tests/mpi/groups_differ_within_rank.smp: groups over "x" with different
                     trip counts give the right answer on 4 ranks, on 2 ranks of 2 devices
                     (whose devices are in different groups, each spanning both ranks) and
                     on 1 rank of 4 (no hang: each group moves its data at its own pace).
  stuck collective   tests/mpi/stuck_collective.smp on two ranks with different data (each rank's
                     steps.npy): rank 1 waits inside MPI in a psum rank 0 never runs; the
                     watchdog (SHMAP_COLLECTIVE_TIMEOUT=2) ends the job with its report.
  other programs     ranks started with different arguments (`mpirun -np 1 prog --steps=3 :
                     -np 1 prog --steps=5`) or executables stop at start-up, rank 0 naming
                     the difference once.

    python3 tests/mpi/failures.py --shmapc build/compiler/shmapc --mismatch build/tests/mpi_mismatch"""
import argparse
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checks import FAILED, MPIRUN, expect  # noqa: E402


def rank_pids(exe):
    """{rank: pid} of the processes running exe (or an emulator running it, whose arguments
    start with it: tools/test_other_cpu.sh), from their environment (Open MPI sets
    OMPI_COMM_WORLD_RANK)."""
    ranks = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            args = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")[:2]
            if os.readlink("/proc/%s/exe" % pid) != exe and exe.encode() not in args:
                continue
            env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
        except OSError:
            continue
        for kv in env:
            if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
                ranks[int(kv.split(b"=")[1])] = int(pid)
    return ranks


def write_npy_i32_scalar(path, value):
    """A numpy .npy file (version 1.0) holding one little-endian int32, as np.save writes it."""
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (), }"
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack("<i", value))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("--mismatch", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # one rank fails
        exe = os.path.join(tmp, "one_rank_fails")
        subprocess.run([a.shmapc, "compile", os.path.join(HERE, "one_rank_fails.smp"), "--mpi", "-o", exe], check=True)
        r = subprocess.run(MPIRUN + ["-np", "2", exe], capture_output=True, text=True, timeout=120)
        expect("one rank fails: status 2, its output so far, rank 1 named",
               r.returncode == 2 and r.stdout == "x: f32[3]\n[0, 1, 2]\n" and
               "shmap runtime error: rank 1: take: index 3 is out of range for an axis of size 3" in r.stderr
               and "shmap runtime error: rank 0" not in r.stderr,
               "status %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr))

        # a rank is killed
        exe = os.path.realpath(os.path.join(tmp, "long_loop"))
        subprocess.run([a.shmapc, "compile", os.path.join(HERE, "long_loop.smp"), "--mpi", "-o", exe], check=True)
        job = subprocess.Popen(MPIRUN + ["-np", "2", exe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ranks = {}
        deadline = time.time() + 60
        while len(ranks) < 2 and time.time() < deadline and job.poll() is None:
            time.sleep(0.2)
            ranks = rank_pids(exe)
        time.sleep(1.0)  # well into the loop
        if 1 in ranks:
            os.kill(ranks[1], signal.SIGKILL)
        try:
            out, err = job.communicate(timeout=60)
            ended = True
        except subprocess.TimeoutExpired:
            job.kill()
            out, err = job.communicate()
            ended = False
        expect("a killed rank ends the job, named",
               1 in ranks and ended and job.returncode != 0 and "rank 1" in err,
               "ranks found %s, ended %s, status %s\nstderr:\n%s" % (ranks, ended, job.returncode, err))

        # ranks started with different arguments, or different executables: refused at start-up,
        # rank 0 naming what differs, once
        r = subprocess.run(MPIRUN + ["-np", "1", exe, "--steps=3", ":", "-np", "1", exe, "--steps=5"],
                           capture_output=True, text=True, timeout=120)
        expect("ranks with different arguments are refused at start-up, the difference named once",
               r.returncode == 2 and r.stdout == "" and r.stderr.count("shmap runtime error") == 1 and
               "shmap runtime error: the ranks of this job do not all run the same program with the same arguments"
               in r.stderr and "\n  rank 1 runs other arguments (`--steps=5`, rank 0's `--steps=3`)\n" in r.stderr,
               "status %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr))
        other = os.path.join(tmp, "one_rank_fails")
        r = subprocess.run(MPIRUN + ["-np", "1", exe, ":", "-np", "1", other], capture_output=True, text=True,
                           timeout=120)
        expect("ranks running different executables are refused at start-up",
               r.returncode == 2 and r.stdout == "" and r.stderr.count("shmap runtime error") == 1 and
               "\n  rank 1 runs another executable (" in r.stderr,
               "status %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr))

        # groups that run different numbers of collectives (y = 0 swaps once and adds 1, y = 1
        # swaps back and adds 4): each group waits only for itself, with one device per rank, and
        # with several, whose devices differ in y, so a rank's two groups progress differently
        exe = os.path.join(tmp, "groups_differ")
        subprocess.run([a.shmapc, "compile", os.path.join(HERE, "groups_differ_within_rank.smp"), "--mpi", "-o", exe],
                       check=True)
        for layout in (["-np", "4", exe], ["-np", "2", exe, "--devices-per-rank=2"],
                       ["-np", "2", exe, "--devices-per-rank=2", "--reduce-locally-first"],
                       ["-np", "1", exe, "--devices-per-rank=4"]):
            r = subprocess.run(MPIRUN + layout, capture_output=True, text=True, timeout=120)
            expect("groups with different trip counts: " + " ".join(layout[:2] + layout[3:]),
                   r.returncode == 0 and r.stdout == "x: f32[8]\n[5, 6, 6, 7, 1, 2, 10, 11]\n",
                   "status %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr))

        # the reported program itself (a while over x whose body communicates over y), on one rank
        # of 4 devices, where it hung: its expected output (a numpy-checked golden file)
        exe = os.path.join(tmp, "trip_counts")
        src = os.path.join(os.path.dirname(HERE), "run", "group_loop_trip_counts.smp")
        subprocess.run([a.shmapc, "compile", src, "--mpi", "-o", exe], check=True)
        r = subprocess.run(MPIRUN + ["-np", "1", exe, "--devices-per-rank=4"], capture_output=True, text=True,
                           timeout=120)
        expect("a while over x with collectives over y, 1 rank of 4 devices",
               r.returncode == 0 and r.stdout == open(src[:-4] + ".expected").read(),
               "status %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr))

        # ranks whose data differ (each its own steps.npy): rank 1 waits in a psum that rank 0
        # never runs, inside MPI; the watchdog ends the job after SHMAP_COLLECTIVE_TIMEOUT=2
        exe = os.path.join(tmp, "stuck")
        stuck = os.path.join(HERE, "stuck_collective.smp")
        subprocess.run([a.shmapc, "compile", stuck, "--mpi", "-o", exe], check=True)
        # (the psum of line 9, column 10, counted on the source; the path as shmapc was given it)
        stuck_psum = 'psum over "i" of f32[1] at %s:9:10 (its collective #1)' % stuck
        dirs = []
        for steps in (3, 5):
            d = os.path.join(tmp, "steps%d" % steps)
            os.mkdir(d)
            write_npy_i32_scalar(os.path.join(d, "steps.npy"), steps)
            dirs.append(d)
        start = time.time()
        # (-x sets the variable for its own part of the command line only)
        r = subprocess.run(MPIRUN + ["-x", "SHMAP_COLLECTIVE_TIMEOUT=2", "-np", "1", "-wdir", dirs[0], exe, ":",
                                     "-x", "SHMAP_COLLECTIVE_TIMEOUT=2", "-np", "1", "-wdir", dirs[1], exe],
                           capture_output=True, text=True, timeout=120)
        took = time.time() - start
        expect("a collective stuck inside MPI ends the job with the watchdog's report",
               r.returncode != 0 and took < 30 and
               "shmap runtime error: rank 1: a collective has waited " in r.stderr and
               ("more than SHMAP_COLLECTIVE_TIMEOUT=2 s: device 1 (i=1) waits in %s, for the group of 2 devices:\n"
                "  device 0 (i=0): on rank 0 (its whereabouts are known there)\n  device 1 (i=1): waits in %s\n"
                % (stuck_psum, stuck_psum)) in r.stderr,
               "status %d after %.1f s\nstdout:\n%s\nstderr:\n%s" % (r.returncode, took, r.stdout, r.stderr))

        # a layout that fits no mesh of the program: stopped before it runs, said once
        exe = os.path.join(tmp, "psum")
        subprocess.run([a.shmapc, "compile", os.path.join(HERE, "..", "..", "samples", "psum.smp"), "--mpi", "-o", exe],
                       check=True)
        r = subprocess.run(MPIRUN + ["-np", "3", exe], capture_output=True, text=True, timeout=120)
        want = ("shmap runtime error: the mesh has 4 devices, but the job runs 3 ranks x 1 devices per rank = 3: "
                "start it with mpirun -np R and --devices-per-rank=D where R x D = 4\n")
        expect("a layout that fits no mesh stops at start-up: status 2, one message, no abort report",
               r.returncode == 2 and r.stdout == "" and r.stderr.count("shmap runtime error") == 1 and
               want in r.stderr and "MPI_ABORT" not in r.stderr and "rank 1" not in r.stderr,
               "status %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr))
        r = subprocess.run(MPIRUN + ["-np", "2", exe, "--devices-per-rank=0"], capture_output=True, text=True,
                           timeout=120)
        expect("a bad --devices-per-rank is refused",
               r.returncode != 0 and "psum: error: --devices-per-rank=0 is not a number of devices from 1 to 4096"
               in r.stderr, "status %d\nstderr:\n%s" % (r.returncode, r.stderr))

        # a pipeline on meshes of 4 and 2 devices on 2 ranks of 3: a rank would span both groups
        exe = os.path.join(tmp, "meshes")
        subprocess.run([a.shmapc, "compile", os.path.join(HERE, "..", "run", "pipeline_meshes.smp"), "--mpi", "-o",
                        exe], check=True)
        r = subprocess.run(MPIRUN + ["-np", "2", exe, "--devices-per-rank=3"], capture_output=True, text=True,
                           timeout=120)
        want = ("its device groups differ in size, so each rank's devices must lie in one group, which 6 devices over "
                "2 ranks do not: run a rank per device, or --devices-per-rank=D dividing every group's devices")
        expect("a pipeline whose ranks would span device groups of different sizes stops, saying what to do",
               r.returncode == 2 and want in r.stderr and r.stdout == "",
               "status %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr))

        # mismatched collectives
        r = subprocess.run(MPIRUN + ["-np", "2", a.mismatch, "--check-collectives"], capture_output=True, text=True,
                           timeout=120)
        want = ("--check-collectives: the ranks disagree on a collective: rank 0 runs psum over mesh axes (0) of "
                "16 bytes a device, rank 1 runs pmax over mesh axes (0) of 16 bytes a device")
        expect("mismatched collectives stop the job, both named", r.returncode != 0 and want in r.stderr,
               "status %d\nstderr:\n%s" % (r.returncode, r.stderr))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
