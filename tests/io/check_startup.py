#!/usr/bin/env python3
"""What a compiled program refuses before it runs (docs/runtime.md "Start-up checks"): a
--trace / SHMAP_TRACE file it cannot write, and a SHMAP_* environment variable with a value
it does not take. Each is status 2 with one message naming the file or the variable, and no
program output (the program did not run).

    python3 tests/io/check_startup.py --shmapc build/compiler/shmapc"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import FAILED, expect  # noqa: E402

PROGRAM = """# Prints one line: any output means the program ran.
def main() {
  print(iota(f32[3]));
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "prog.smp")
        open(src, "w").write(PROGRAM)
        exe = os.path.join(tmp, "prog")
        subprocess.run([a.shmapc, "compile", src, "-o", exe], check=True)
        clean = {k: v for k, v in os.environ.items() if not k.startswith("SHMAP_")}

        def run(args=(), **env):
            return subprocess.run([exe] + list(args), capture_output=True, text=True, timeout=120,
                                  env=dict(clean, **env), cwd=tmp)

        r = run()
        expect("the program runs", r.returncode == 0 and r.stdout != "", r.stdout + r.stderr)
        output = r.stdout

        # --trace / SHMAP_TRACE: refused before the program runs.
        missing = os.path.join(tmp, "no_such_dir", "t.json")
        for how, args, env in (("--trace", ["--trace=" + missing], {}), ("SHMAP_TRACE", [], {"SHMAP_TRACE": missing})):
            r = run(args, **env)
            expect(how + " into a missing folder: status 2 before the program runs",
                   r.returncode == 2 and r.stdout == "" and
                   r.stderr == "shmap runtime error: --trace: cannot write %s: No such file or directory\n" % missing,
                   "status %d\nstdout: %s\nstderr: %s" % (r.returncode, r.stdout, r.stderr))
        r = run(["--trace=" + tmp])
        expect("--trace=a folder: status 2, it is a directory", r.returncode == 2 and r.stdout == "" and
               "--trace: cannot write %s: it is a directory" % tmp in r.stderr, r.stderr)
        before = sorted(os.listdir(tmp))
        r = run(["--trace=" + os.path.join(tmp, "t.json")])
        expect("a writable --trace: the program runs and writes the trace, nothing else",
               r.returncode == 0 and r.stdout == output and
               sorted(os.listdir(tmp)) == sorted(before + ["t.json"]) and
               open(os.path.join(tmp, "t.json")).read().startswith('{"displayTimeUnit"'), r.stderr)

        # A program that fails after the trace file was opened leaves no temporary file.
        failing = os.path.join(tmp, "fails.smp")
        open(failing, "w").write('def main() {\n  print(load("missing.npy", f32[3]));\n}\n')
        fexe = os.path.join(tmp, "fails")
        subprocess.run([a.shmapc, "compile", failing, "-o", fexe], check=True)
        d = os.path.join(tmp, "traces")
        os.mkdir(d)
        r = subprocess.run([fexe, "--trace=" + os.path.join(d, "t.json")], capture_output=True, text=True,
                           timeout=120, env=clean, cwd=tmp)
        expect("a program that fails while tracing leaves no trace file and no temporary file",
               r.returncode == 2 and "missing.npy" in r.stderr and os.listdir(d) == [],
               "status %d, %s, %s" % (r.returncode, r.stderr, os.listdir(d)))

        # SHMAP_* values.
        bad = [("SHMAP_THREADS", "bogus", "pool (the default: a pool of device threads) or spawn (threads per call)"),
               ("SHMAP_THREADS", "-1", "pool"),
               ("SHMAP_STATS", "yes", "0 (no table), 1 (the statistics table), wait (with wait times) or pipeline "
                                      "(the pipelines' bubbles)"),
               ("SHMAP_BLAS", "mkl", "onednn (the default) or openblas"),
               ("SHMAP_LOG_RANKS", "2", "0 or 1"),
               ("SHMAP_CHECK_COLLECTIVES", "true", "0 or 1"),
               ("SHMAP_REDUCE_LOCALLY_FIRST", "-1", "0 or 1"),
               ("SHMAP_MPI_MAX_MESSAGE", "-5", "a number of bytes from 1 to 2147483646"),
               ("SHMAP_MPI_MAX_MESSAGE", "0", "a number of bytes"),
               ("SHMAP_MPI_MAX_MESSAGE", "12abc", "a number of bytes"),
               ("SHMAP_MPI_MAX_MESSAGE", "2147483647", "a number of bytes"),
               ("SHMAP_MPI_MAX_MESSAGE", "99999999999999999999999", "a number of bytes"),
               ("SHMAP_MPI_MAX_TAG", "0", "a number from 1 to 2147483646 (the largest tag a pipeline's messages use)"),
               ("SHMAP_MPI_MAX_TAG", "x", "a number from 1"),
               ("SHMAP_COLLECTIVE_TIMEOUT", "abc", "a number of seconds above 0 (how long a device may wait"),
               ("SHMAP_COLLECTIVE_TIMEOUT", "0", "a number of seconds above 0"),
               ("SHMAP_COLLECTIVE_TIMEOUT", "-1", "a number of seconds above 0"),
               ("SHMAP_COLLECTIVE_TIMEOUT", "2s", "a number of seconds above 0"),
               ("SHMAP_COLLECTIVE_TIMEOUT", "nan", "a number of seconds above 0"),
               ("SHMAP_COLLECTIVE_TIMEOUT", "inf", "a number of seconds above 0")]
        for name, value, takes in bad:
            r = run(**{name: value})
            want = "prog: error: %s='%s' is not a value it takes: %s is %s" % (name, value, name, takes)
            expect("%s=%s: status 2, named, before the program runs" % (name, value),
                   r.returncode == 2 and r.stdout == "" and r.stderr.startswith(want) and r.stderr.count("\n") == 1,
                   "status %d\nstdout: %s\nstderr: %s" % (r.returncode, r.stdout, r.stderr))
        good = [("SHMAP_THREADS", "spawn"), ("SHMAP_THREADS", "pool"), ("SHMAP_THREADS", ""), ("SHMAP_STATS", "0"),
                ("SHMAP_BLAS", "onednn"), ("SHMAP_BLAS", "openblas"), ("SHMAP_LOG_RANKS", "0"),
                ("SHMAP_MPI_MAX_MESSAGE", "7"), ("SHMAP_MPI_MAX_TAG", "2"), ("SHMAP_CHECK_COLLECTIVES", "1"),
                ("SHMAP_COLLECTIVE_TIMEOUT", ""), ("SHMAP_COLLECTIVE_TIMEOUT", "0.5"),
                ("SHMAP_COLLECTIVE_TIMEOUT", "30")]
        for name, value in good:
            r = run(**{name: value})
            expect("%s=%s is taken" % (name, value), r.returncode == 0 and r.stdout == output, r.stderr)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
