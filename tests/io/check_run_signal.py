#!/usr/bin/env python3
"""A signal to `shmapc run` (SIGTERM, SIGINT, SIGHUP) reaches the program it runs: shmapc
waits for it, removes its temporary folder and exits with 128 + the signal; no program is
left running and no folder left behind.

    python3 tests/io/check_run_signal.py --shmapc build/compiler/shmapc"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import FAILED, expect, processes  # noqa: E402

PROGRAM = """# Loops for minutes unless stopped.
arg steps: i32 = 2000000000;
def main() {
  let x = iota(f32[8]);
  let i = 0;
  while i < steps {
    x = x * 0.5 + 1.0;
    i = i + 1;
  }
  print(x);
}
"""


def children(pid):
    """The pids whose parent is pid."""
    return [p for p, fields in processes() if int(fields[1]) == pid]


def is_prog(pid):
    """Whether pid runs the compiled program: its executable, or the program an emulator it
    runs executes (tools/test_other_cpu.sh: QEMU's process has the program among its arguments)."""
    try:
        if os.path.basename(os.readlink("/proc/%d/exe" % pid)) == "prog":
            return True
        args = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")[:2]
    except OSError:
        return False
    return any(os.path.basename(x) == b"prog" for x in args)


def alive(pid):
    try:
        state = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def default_signals():
    """(preexec_fn) The child starts with the three signals at their defaults: a shell's
    background job, or a test driver, may have had SIGINT ignored, which shmapc keeps."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "loop.smp")
        open(src, "w").write(PROGRAM)
        env = dict(os.environ, TMPDIR=tmp)  # shmapc's temporary folders go here, to be counted
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            job = subprocess.Popen([a.shmapc, "run", src], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   preexec_fn=default_signals)
            prog = None
            deadline = time.time() + 120
            while prog is None and time.time() < deadline and job.poll() is None:
                for c in children(job.pid):
                    if is_prog(c):
                        prog = c
                time.sleep(0.1)
            if prog is None:
                job.kill()
                job.communicate()
                expect("%s: the program started" % sig.name, False)
                continue
            time.sleep(0.5)
            job.send_signal(sig)
            try:
                out, err = job.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                job.kill()
                out, err = job.communicate()
            left = [f for f in os.listdir(tmp) if f.startswith("shmapc-")]
            expect("%s: shmapc exits with %d, the program is gone, no temporary folder is left" % (sig.name, 128 + sig),
                   job.returncode == 128 + sig and not alive(prog) and left == [],
                   "status %s, program alive %s, left %s, stderr %s" % (job.returncode, alive(prog), left, err))
            if alive(prog):
                os.kill(prog, signal.SIGKILL)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
