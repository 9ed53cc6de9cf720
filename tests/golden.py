#!/usr/bin/env python3
"""Golden tests: each program has its expected output beside it.

  run     PROG.smp  -> compiled, run; stdout (and the exit status if not 0) must equal
                       PROG.expected byte for byte. A leading comment `# ARGS: --stats` passes
                       arguments to the program, `# FLAGS: ...` flags to shmapc; the environment
                       variable SHMAPC_EXTRA_FLAGS adds flags to every compile (--target-cpu=x86-64-v3).
  error   PROG.smp  -> `shmapc check` must exit 1; stderr must equal PROG.expected.

Both compile with --verify-each: after sema and after every pass, the IR verifier checks the
structure and every equation against its primitive's shape rule (compiler/prims/), so an
ill-typed equation any pass builds fails the test as an internal error.

Paths in diagnostics are relative to the repository root, so the runner works from there.

  golden.py --shmapc BUILD/compiler/shmapc run samples/psum.smp
  golden.py --shmapc BUILD/compiler/shmapc --update all     # regenerate every expectation
"""
import argparse
import difflib
import glob
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_programs():
    return sorted(glob.glob("samples/*.smp") + glob.glob("tests/run/*.smp"))


def error_programs():
    return sorted(glob.glob("tests/errors/*.smp"))


def header(path, key):
    """Words after `# KEY:` in the program's leading comment lines."""
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                break
            if line.startswith("# %s:" % key):
                return line[len("# %s:" % key):].split()
    return []


def program_args(path):
    return header(path, "ARGS")


def compile_flags(path):
    return header(path, "FLAGS")


def link_data(path, tmp):
    """Links the program folder's data/ (fixture files) into the directory `tmp`."""
    data = os.path.join(os.path.dirname(os.path.abspath(path)), "data")
    if os.path.isdir(data) and not os.path.exists(os.path.join(tmp, "data")):
        os.symlink(data, os.path.join(tmp, "data"))


def run_program(exe, path, args, tmp):
    """Runs a compiled program in the empty directory `tmp` (what it saves lands there), with
    the program folder's data/ linked in."""
    link_data(path, tmp)
    return subprocess.run([exe] + args, capture_output=True, text=True, timeout=300, cwd=tmp)


def expects_failure(path):
    """Whether the program's expected output ends in a nonzero exit status."""
    expected = os.path.splitext(path)[0] + ".expected"
    return os.path.exists(expected) and "\n[exit status " in "\n" + open(expected).read()


def actual_run(shmapc, path):
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "prog")
        c = subprocess.run([shmapc, "compile", path, "-o", exe, "--verify-each"] + compile_flags(path)
                           + os.environ.get("SHMAPC_EXTRA_FLAGS", "").split(), capture_output=True, text=True, timeout=300)
        if c.returncode != 0:
            return "compile failed (status %d):\n%s" % (c.returncode, c.stderr)
        r = run_program(exe, path, program_args(path), tmp)
        out = r.stdout
        if r.returncode != 0:
            out += "[exit status %d]\n%s" % (r.returncode, r.stderr)
        return out


def actual_error(shmapc, path):
    r = subprocess.run([shmapc, "check", path, "--verify-each"] + compile_flags(path), capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 1:
        return "expected exit status 1, got %d\nstdout:\n%s\nstderr:\n%s" % (
            r.returncode, r.stdout, r.stderr)
    return r.stderr


def check(shmapc, kind, path, update):
    actual = actual_run(shmapc, path) if kind == "run" else actual_error(shmapc, path)
    expected_path = os.path.splitext(path)[0] + ".expected"
    if update:
        with open(expected_path, "w") as f:
            f.write(actual)
        return True
    if not os.path.exists(expected_path):
        print("%s: no expected output (%s); run with --update and review it" % (path, expected_path))
        return False
    with open(expected_path) as f:
        expected = f.read()
    if actual == expected:
        return True
    print("%s: output differs from %s" % (path, expected_path))
    sys.stdout.writelines(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                               "expected", "actual"))
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("--update", action="store_true", help="rewrite the expected files")
    ap.add_argument("kind", choices=["run", "error", "all"])
    ap.add_argument("programs", nargs="*")
    a = ap.parse_args()
    os.chdir(ROOT)
    shmapc = os.path.abspath(a.shmapc) if os.sep in a.shmapc else a.shmapc
    jobs = []
    if a.kind == "all":
        jobs = [("run", p) for p in run_programs()] + [("error", p) for p in error_programs()]
    else:
        progs = a.programs or (run_programs() if a.kind == "run" else error_programs())
        jobs = [(a.kind, os.path.relpath(os.path.abspath(p), ROOT) if os.path.isabs(p) else p)
                for p in progs]
    failed = [p for kind, p in jobs if not check(shmapc, kind, p, a.update)]
    if a.update:
        print("updated %d expected files; review them with git diff" % len(jobs))
    if failed:
        print("%d of %d golden tests failed" % (len(failed), len(jobs)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
