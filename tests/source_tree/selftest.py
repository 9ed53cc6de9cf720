#!/usr/bin/env python3
"""check.py on a scratch git repository: no change passes; a new file (untracked or ignored), a
rewritten tracked, modified or untracked file, or a deleted one fails and is named; a build
folder inside the tree (one holding a CMakeCache.txt) is left out; outside a git checkout both
steps pass, saying so."""
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check.py")
failures = []


def run(mode, root, build, state):
    return subprocess.run([sys.executable, CHECK, mode, "--root", root, "--build", build, "--state", state],
                          capture_output=True, text=True)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def case(name, change, expect_fail, expect_text=None):
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "src")
        build = os.path.join(root, "build")
        state = os.path.join(tmp, "state.json")
        os.makedirs(root)
        git = lambda *a: subprocess.run(["git", "-C", root] + list(a), check=True, capture_output=True)
        git("init", "-q")
        write(os.path.join(root, ".gitignore"), "/build/\n*.npz\n")
        write(os.path.join(root, "samples", "a.smp"), "tracked\n")
        write(os.path.join(root, "samples", "b.smp"), "tracked\n")
        git("add", ".")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")
        write(os.path.join(root, "samples", "b.smp"), "modified before the run\n")
        write(os.path.join(root, "notes.txt"), "untracked before the run\n")
        write(os.path.join(build, "CMakeCache.txt"), "")
        if run("snapshot", root, build, state).returncode != 0:
            failures.append("%s: the snapshot failed" % name)
            return
        change(root)
        r = run("compare", root, build, state)
        failed = r.returncode != 0
        if failed != expect_fail or (expect_text and expect_text not in r.stdout):
            failures.append("%s: compare exited %d, expected %s%s:\n%s" % (
                name, r.returncode, "a failure" if expect_fail else "success",
                " naming %r" % expect_text if expect_text else "", r.stdout + r.stderr))
        else:
            print("ok: %s" % name)


case("nothing changed", lambda root: None, False)
case("a build folder written", lambda root: write(os.path.join(root, "build", "x.o"), "y"), False)
case("a second build folder written",
     lambda root: (write(os.path.join(root, "build-asan", "CMakeCache.txt"), ""),
                   write(os.path.join(root, "build-asan", "x.o"), "y")), False)
case("a new untracked file", lambda root: write(os.path.join(root, "samples", "new.txt"), "x"), True,
     "new:       samples/new.txt")
case("a new ignored file", lambda root: write(os.path.join(root, "samples", "moe_ckpt.npz"), "x"), True,
     "new:       samples/moe_ckpt.npz")
case("a tracked file rewritten", lambda root: write(os.path.join(root, "samples", "a.smp"), "other\n"), True,
     "samples/a.smp")
case("a modified file rewritten", lambda root: write(os.path.join(root, "samples", "b.smp"), "again\n"), True,
     "rewritten: samples/b.smp")
case("an untracked file rewritten", lambda root: write(os.path.join(root, "notes.txt"), "again\n"), True,
     "rewritten: notes.txt")
case("an untracked file removed", lambda root: os.unlink(os.path.join(root, "notes.txt")), True,
     "gone:      notes.txt")

with tempfile.TemporaryDirectory() as tmp:
    state = os.path.join(tmp, "state.json")
    a, b = run("snapshot", tmp, tmp, state), run("compare", tmp, tmp, state)
    if a.returncode or b.returncode or "not a git checkout" not in b.stdout:
        failures.append("outside a git checkout: %d %d %s" % (a.returncode, b.returncode, a.stdout + b.stdout))
    else:
        print("ok: outside a git checkout")

if failures:
    print("\n".join("FAIL: " + f for f in failures))
    sys.exit(1)
