#!/usr/bin/env python3
"""The watchdog's report of a compiled program names where each member is in the program
(docs/runtime.md, "Stuck collectives"), on threads: tests/watchdog/slow_member.smp, whose
device 1 computes long between two collectives, run with SHMAP_COLLECTIVE_TIMEOUT=0.1. Device
0 waits in the psum that grad's transpose makes of the implicit pbroadcast at `x * w` (line 9,
the `*` at column 20); device 1's last collective is the psum of line 14 (column 11). The
locations were counted by hand on the source. (Under MPI: tests/mpi/failures.py.)

    python3 tests/watchdog/check_watchdog.py --shmapc build/compiler/shmapc"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "io"))
from checks import FAILED, expect  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    shmapc = os.path.abspath(a.shmapc)
    os.chdir(ROOT)  # (the report shows the path as shmapc was given it)
    prog = "tests/watchdog/slow_member.smp"
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "slow")
        subprocess.run([shmapc, "compile", prog, "-o", exe], check=True)
        env = dict(os.environ, SHMAP_COLLECTIVE_TIMEOUT="0.1")
        start = time.time()
        r = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=120)
        took = time.time() - start
        detail = "status %d after %.1f s\nstdout:\n%s\nstderr:\n%s" % (r.returncode, took, r.stdout, r.stderr)
        waits = 'psum over "i" of f32[64] at %s:9:20 (its collective #2)' % prog
        expect("a slow member: status 2 and the watchdog's report", r.returncode == 2 and
               "shmap runtime error: a collective has waited " in r.stderr, detail)
        expect("the waiting device names the psum of grad's transpose at the forward op's place",
               "more than SHMAP_COLLECTIVE_TIMEOUT=0.1 s: device 0 (i=0) waits in %s, for the group of 2 devices:\n"
               % waits in r.stderr and "\n  device 0 (i=0): waits in %s\n" % waits in r.stderr, detail)
        expect("the member that has not arrived names the place of the last collective it completed",
               "\n  device 1 (i=1): has not arrived: it runs its shmap body; the last collective it completed is "
               "psum over \"i\" of f32[64] at %s:14:11 (its collective #1)\n" % prog in r.stderr, detail)
    if FAILED:
        print("%d check(s) failed" % len(FAILED))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
