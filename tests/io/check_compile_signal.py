#!/usr/bin/env python3
"""A signal (SIGTERM, SIGINT, SIGHUP) while shmapc compiles ends it promptly, wherever the
compile is (LLVM's code generation, the link): shmapc exits with 128 + the signal, leaves no
temporary folder or file behind (in $TMPDIR, set to a private folder here, nor beside the
output), ends the linker, and leaves an existing -o file with its bytes. For `shmapc compile`,
`shmapc compile --emit=obj` and `shmapc run` (which then runs no program); and a signal shmapc
was started ignoring (nohup's SIGHUP) stays ignored.

The program compiled is generated: thousands of statements, several seconds of code
generation. The signal is sent once shmapc has used a second of CPU time (its front end takes
a small part of that), so it arrives inside LLVM on a loaded machine too; or, for the link,
once the linker has started. An exit status of 128 + the signal shows that it came before
the compile ended (a finished compile exits 0).

    python3 tests/io/check_compile_signal.py --shmapc build/compiler/shmapc"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import FAILED, expect, processes  # noqa: E402
from check_run_signal import alive, children, default_signals  # noqa: E402

STATEMENTS = 20000
PROMPT_S = 2.0  # from the signal to shmapc's exit (about 0.05 s when the machine is idle)
PREVIOUS = b"the previous output, which an interrupted compile must leave as it is\n"


def big_program():
    lines = ["# Thousands of statements: several seconds of code generation.", "def main() {",
             "  let x = iota(f32[8]);"]
    for i in range(STATEMENTS):
        lines.append("  x = x * %d.5 + sin(x) * %d.0;" % (i % 7, i % 5 + 1))
    lines += ["  print(x);", "}"]
    return "\n".join(lines) + "\n"


def cpu_seconds(pid):
    """The user + system time of a process, all its threads, or None once it is gone."""
    try:
        fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def linker_started(pid, tmp):
    """The linker's pid once shmapc has written its object file and started the linker."""
    for d in os.listdir(tmp):
        if d.startswith("shmapc-") and os.path.exists(os.path.join(tmp, d, "prog.o")):
            for c in children(pid):
                if alive(c):
                    return c
    return None


def ignoring_sighup():
    """(preexec_fn) As under nohup: SIGHUP ignored."""
    default_signals()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def interrupt(args, tmp, sig, at_link=False, preexec=default_signals):
    """Runs shmapc with args, sends sig at the chosen point; (status, seconds from the signal
    to the exit, stderr, the linker's pid or None), or None if the point never came."""
    env = dict(os.environ, TMPDIR=tmp)
    job = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec)
    deadline = time.time() + 300
    linker = None
    while time.time() < deadline and job.poll() is None:
        if at_link:
            linker = linker_started(job.pid, tmp)
            if linker:
                break
        elif (cpu_seconds(job.pid) or 0) >= 1.0:
            break
        time.sleep(0.005 if at_link else 0.05)
    if job.poll() is not None or time.time() >= deadline:
        job.kill()
        job.communicate()
        return None
    job.send_signal(sig)
    sent = time.time()
    try:
        job.wait(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
    took = time.time() - sent
    _, err = job.communicate()
    return job.returncode, took, err.decode(errors="replace"), linker


def group_alive(pgid):
    """Whether any process of the process group pgid (the linker's: g++, collect2, ld) is
    still running, after a moment for them to die."""
    deadline = time.time() + 1.0
    while True:
        running = [pid for pid, fields in processes() if int(fields[2]) == pgid and fields[0] != "Z"]
        if not running or time.time() > deadline:
            return running
        time.sleep(0.05)


def leftovers(tmp, out_dir):
    return sorted(os.listdir(tmp)) + sorted(f for f in os.listdir(out_dir) if ".tmp-" in f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        src = os.path.join(work, "big.smp")
        open(src, "w").write(big_program())
        out_dir = os.path.join(work, "out")
        os.mkdir(out_dir)
        cases = []
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            cases.append(("compile -o, %s in LLVM" % sig.name, ["compile", src, "-o"], "prog", sig, False))
        cases.append(("compile --emit=obj -o, SIGTERM in LLVM", ["compile", src, "--emit=obj", "-o"], "prog.o",
                      signal.SIGTERM, False))
        cases.append(("compile -o, SIGINT in the link", ["compile", src, "-o"], "prog", signal.SIGINT, True))
        for sig in (signal.SIGTERM, signal.SIGINT):
            cases.append(("run, %s in LLVM" % sig.name, ["run", src], None, sig, False))
        cases.append(("run, SIGTERM in the link", ["run", src], None, signal.SIGTERM, True))
        for what, args, out_name, sig, at_link in cases:
            tmp = os.path.join(work, "tmp")
            os.mkdir(tmp)
            args = [a.shmapc] + args
            out = None
            if out_name:
                out = os.path.join(out_dir, out_name)
                with open(out, "wb") as f:
                    f.write(PREVIOUS)
                args.append(out)
            r = interrupt(args, tmp, sig, at_link)
            if r is None:
                expect("%s: the compile was still running when the signal was due" % what, False)
            else:
                status, took, err, linker = r
                left = leftovers(tmp, out_dir)
                kept = out is None or open(out, "rb").read() == PREVIOUS
                linking = group_alive(linker) if linker else []
                expect("%s: status %d within %.0f s, nothing left behind%s%s" %
                       (what, 128 + sig, PROMPT_S, ", the output untouched" if out else "",
                        ", the linker ended" if at_link else ""),
                       status == 128 + sig and took < PROMPT_S and left == [] and kept and not linking,
                       "status %s after %.2f s, left %s, output kept %s, linker processes running %s, stderr %s" %
                       (status, took, left, kept, linking, err))
            for f in os.listdir(tmp):
                subprocess.run(["rm", "-rf", os.path.join(tmp, f)])
            os.rmdir(tmp)
        # A signal shmapc was started ignoring stays ignored: the compile finishes.
        tmp = os.path.join(work, "tmp")
        os.mkdir(tmp)
        out = os.path.join(out_dir, "nohup")
        r = interrupt([a.shmapc, "compile", src, "-o", out], tmp, signal.SIGHUP, preexec=ignoring_sighup)
        expect("started with SIGHUP ignored (nohup), SIGHUP in LLVM: the compile finishes",
               r is not None and r[0] == 0 and os.path.getsize(out) > 0 and os.listdir(tmp) == [],
               "result %s, left %s" % (r, os.listdir(tmp)))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
