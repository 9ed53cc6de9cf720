#!/usr/bin/env python3
"""One fuzz regression: `shmapc check --verify-each INPUT` must end in time with status 0, or
status 1 and a diagnostic that names the input (`INPUT:line:col: error: ...`) or is one of
the registered diagnostics without a location (`shmapc: error: ... [name]`, e.g. no main).
A leading `# FLAGS:` line passes the flags the fuzz target understands, as it does.

  check_regression.py BUILD/compiler/shmapc tests/fuzz/regressions/crash-XXXX.smp
"""
import re
import subprocess
import sys


FLAGS = ("--explicit-pbroadcast", "--no-check-vma", "--transpose=naive")


def flags(path):
    """The flags of the leading `# FLAGS:` comment lines (as tests/fuzz/fuzz_check.cpp)."""
    out = []
    with open(path, "rb") as f:
        for line in f.read().decode("latin-1").split("\n"):
            if not line.startswith("#"):
                break
            if line.startswith("# FLAGS:"):
                out += [w for w in line[8:].split() if w in FLAGS]
    return out


def main():
    shmapc, path = sys.argv[1], sys.argv[2]
    try:
        r = subprocess.run([shmapc, "check", "--verify-each", path] + flags(path), capture_output=True,
                           text=True, errors="replace", timeout=60)
    except subprocess.TimeoutExpired:
        print("%s: shmapc check did not finish in 60 s" % path)
        return 1
    print(r.stderr[-4000:], end="")
    if r.returncode < 0:
        print("%s: shmapc check was killed by signal %d" % (path, -r.returncode))
        return 1
    if r.returncode not in (0, 1):
        print("%s: shmapc check exited with status %d (an internal error)" % (path, r.returncode))
        return 1
    located = re.search(re.escape(path) + r":\d+:\d+: error: ", r.stderr)
    unlocated = re.search(r"^shmapc: error: .*\[[a-z0-9-]+\]$", r.stderr, re.M)
    if r.returncode == 1 and not (located or unlocated):
        print("%s: status 1 without a diagnostic naming the file" % path)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
