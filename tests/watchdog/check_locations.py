#!/usr/bin/env python3
"""Every collective a compiled program calls carries its source location (docs/runtime.md, "Stuck
collectives"): in the LLVM IR (-O0) of every golden run program and sample, each call of a
runtime collective (shm_psum, shm_all_gather, ... shm_scatter_from) comes right after the store
of a constant "file:line:col" into the device's first word, and that location is a place in a
program file (the line exists and the column is inside it). Every one of the runtime's
collectives is called somewhere, so each kind is checked, including those that autodiff's
transposes and the jit partitioner make.

    python3 tests/watchdog/check_locations.py --shmapc build/compiler/shmapc"""
import argparse
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

COLLECTIVES = ["shm_psum", "shm_pmax", "shm_pmin", "shm_pprod", "shm_pbitwise", "shm_all_gather",
               "shm_psum_scatter", "shm_all_to_all", "shm_ppermute", "shm_broadcast", "shm_reduce_to",
               "shm_gather_to", "shm_scatter_from"]
CALL = re.compile(r"call void @(%s)\(ptr [^%%]*%%dev\b" % "|".join(COLLECTIVES))
STORE = re.compile(r"^\s*store ptr (@[\w.]+), ptr %dev, align 8$")
STRING = re.compile(r'^(@[\w.]+) = private unnamed_addr constant \[\d+ x i8\] c"(.*)\\00"', re.M)


def flags_of(path):
    with open(path) as f:
        for line in f:
            if line.startswith("# FLAGS:"):
                return line[len("# FLAGS:"):].split()
    return []


def problems_in(prog, ir, seen):
    strings = dict(STRING.findall(ir))
    lines = ir.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = CALL.search(line)
        if not m:
            continue
        seen.add(m.group(1))
        store = STORE.match(lines[i - 1]) if i else None
        if not store or store.group(1) not in strings:
            out.append("%s: %s is not preceded by the store of its location:\n  %s\n  %s"
                       % (prog, m.group(1), lines[i - 1] if i else "", line.strip()))
            continue
        loc = strings[store.group(1)]
        lm = re.fullmatch(r"(.+):(\d+):(\d+)", loc)
        if not lm:
            out.append("%s: %s's location %r is not file:line:col" % (prog, m.group(1), loc))
            continue
        path, row, col = lm.group(1), int(lm.group(2)), int(lm.group(3))
        try:
            text = open(os.path.join(ROOT, path)).read().split("\n")
        except OSError as e:
            out.append("%s: %s's location %s names no readable file (%s)" % (prog, m.group(1), loc, e))
            continue
        if not (1 <= row <= len(text) and 1 <= col <= len(text[row - 1])):
            out.append("%s: %s's location %s is outside the file" % (prog, m.group(1), loc))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    shmapc = os.path.abspath(a.shmapc)
    os.chdir(ROOT)  # (locations are the paths as given: relative to the repository)
    progs = sorted(glob.glob("tests/run/*.smp")) + sorted(glob.glob("samples/*.smp"))
    seen, problems = set(), []
    for prog in progs:
        r = subprocess.run([shmapc, "compile", prog, "--emit=llvm", "-O0", "-o", "-"] + flags_of(prog),
                           capture_output=True, text=True)
        if r.returncode != 0:
            problems.append("%s: compile failed (status %d)\n%s" % (prog, r.returncode, r.stderr))
            continue
        problems += problems_in(prog, r.stdout, seen)
    missing = [c for c in COLLECTIVES if c not in seen]
    if missing:
        problems.append("no program calls %s: add one that does, so its location is checked" % ", ".join(missing))
    for p in problems:
        print("FAILED: " + p)
    print("%d programs, %d collective entry points called, %d problems" % (len(progs), len(seen), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
