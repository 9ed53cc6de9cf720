#!/usr/bin/env python3
"""No test writes into the source tree: a program's saved files, a checkpoint, lit's Output/,
Python's byte code all belong in the build folder or a temporary one, so a checkout is as
clean after a test run as before it (and a committed file can never be rewritten by one).

  check.py snapshot --root SRC --build BUILD --state FILE   records the tree's state
  check.py compare  --root SRC --build BUILD --state FILE   fails if it has changed since

The state is what `git status --porcelain --ignored --untracked-files=all` lists (modified,
untracked and ignored files, each file by itself), with a hash of each listed file's bytes,
so a test that rewrites a file already modified or untracked is caught too. Build folders are
left out: BUILD where it lies inside SRC, and every top-level folder holding a CMakeCache.txt
(tools/test.sh's build-thread, build-address, ...). CTest runs `snapshot` before every other
test and `compare` after them all (a fixture, tests/CMakeLists.txt), so editing a source file
while the tests run also shows up here. Outside a git checkout there is nothing to compare and
both steps pass, saying so."""
import argparse
import hashlib
import json
import os
import subprocess
import sys


def build_folders(root, build):
    """Pathspecs leaving out the build folders inside `root`."""
    out = []
    rel = os.path.relpath(os.path.realpath(build), os.path.realpath(root))
    if not rel.startswith(".."):
        out.append(rel)
    for name in sorted(os.listdir(root)):
        if os.path.isfile(os.path.join(root, name, "CMakeCache.txt")) and name not in out:
            out.append(name)
    return [":(exclude)" + p for p in out]


def state(root, build):
    """{path: 'XY hash'} for every file git status lists, or None outside a git checkout."""
    try:
        r = subprocess.run(["git", "-C", root, "status", "--porcelain=v1", "-z", "--ignored",
                            "--untracked-files=all", "--", "."] + build_folders(root, build),
                           capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    out = {}
    entries = r.stdout.decode("utf-8", "surrogateescape").split("\0")
    i = 0
    while i < len(entries):
        e = entries[i]
        i += 1
        if not e:
            continue
        code, path = e[:2], e[3:]
        if code[0] in "RC":  # a rename's or copy's source path follows
            i += 1
        full = os.path.join(root, path)
        if os.path.isfile(full) and not os.path.islink(full):
            with open(full, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
        else:
            digest = "-"
        out[path] = code + " " + digest
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("snapshot", "compare"))
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--state", required=True)
    a = ap.parse_args()
    now = state(a.root, a.build)
    if now is None:
        print("not a git checkout (or no git): the source tree's state is not compared")
        if a.mode == "snapshot" and os.path.exists(a.state):
            os.unlink(a.state)
        return 0
    if a.mode == "snapshot":
        with open(a.state, "w") as f:
            json.dump(now, f, indent=0, sort_keys=True)
        print("recorded the state of %s: %d files modified, untracked or ignored" % (a.root, len(now)))
        return 0
    if not os.path.exists(a.state):
        print("FAIL: no snapshot at %s (the fixture's setup test did not run)" % a.state)
        return 1
    with open(a.state) as f:
        before = json.load(f)
    changed = []
    for path in sorted(set(before) | set(now)):
        if path not in before:
            changed.append("new:       " + path)
        elif path not in now:
            changed.append("gone:      " + path)
        elif before[path] != now[path]:
            changed.append("rewritten: " + path)
    if changed:
        print("FAIL: the source tree changed during the test run (a test must write into the build "
              "folder or a temporary one; or a file was edited meanwhile):")
        print("\n".join("  " + c for c in changed))
        return 1
    print("ok: the source tree is as it was before the tests (%d files modified, untracked or "
          "ignored, unchanged)" % len(now))
    return 0


if __name__ == "__main__":
    sys.exit(main())
