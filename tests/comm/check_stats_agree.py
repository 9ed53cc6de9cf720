#!/usr/bin/env python3
"""The static communication report (`shmapc compile --emit=comm`) agrees with the runtime.

For every program in samples/ and tests/run/ (the golden run tests' list, with the same
`# FLAGS:` compile flags and `# ARGS:` program arguments, see tests/golden.py), and the
report's own FileCheck tests tests/ir/comm_*.smp (whose figures are computed by hand):
  1. `shmapc compile PROG --emit=comm FLAGS` prints the report, ending in the runtime's
     `--stats` table computed statically;
  2. the program is compiled and run with `--stats`;
  3. the two tables (from `== shmap collective stats ==` to the end) must be equal byte for
     byte.

A program whose totals depend on data (a conditional whose taken branch is not known
statically and whose branches communicate differently) has no single static table; its
report prints an `(at least)` and an `(at most)` table instead. Such a program is not
compared byte for byte: it is listed as skipped, with the conditionals the report names,
and the runtime's table must still lie between the two bounds, cell by cell.

  check_stats_agree.py --shmapc BUILD/compiler/shmapc [PROG.smp ...]
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import golden  # noqa: E402  (the run-program list and the header conventions)

HEADER = "== shmap collective stats ==\n"
AT_LEAST = "== shmap collective stats (at least) ==\n"
AT_MOST = "== shmap collective stats (at most) ==\n"


def table_after(text, header):
    """The table starting at the last `header` line, up to the end or the next `== ` line."""
    i = text.rfind(header)
    if i < 0:
        return None
    lines = text[i:].splitlines(True)
    out = [lines[0]]
    for line in lines[1:]:
        if line.startswith("== "):
            break
        out.append(line)
    return "".join(out)


def parse_table(table):
    """{kind: (calls, bytes_sent, bytes_received)} of a --stats table."""
    rows = {}
    for line in table.splitlines()[2:]:
        if line == "(no collectives)":
            continue
        kind, calls, sent, received = line.split()
        # "unbounded": a while loop's upper bound
        rows[kind] = tuple(float("inf") if v == "unbounded" else int(v) for v in (calls, sent, received))
    return rows


def data_dependent_conds(report):
    """The conditionals and while loops a data-dependent report names (lines `  if at
    FILE:LINE:COL`, `  while at ...`)."""
    out, inside = [], False
    for line in report.splitlines():
        if line.startswith("total over all devices") and "data-dependent" in line:
            inside = True
        elif inside and (line.startswith("  if") or line.startswith("  while")):
            out.append(line.strip())
        elif inside and line.startswith("so the runtime"):
            break
    return out


def check(shmapc, path):
    """Returns (status, message): status 'ok', 'bounds' (data-dependent) or 'FAIL'."""
    flags = golden.compile_flags(path)
    c = subprocess.run([shmapc, "compile", path, "--emit=comm"] + flags, capture_output=True,
                       text=True, timeout=300)
    if c.returncode != 0:
        return "FAIL", "--emit=comm failed (status %d):\n%s" % (c.returncode, c.stderr)
    report = c.stdout
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "prog")
        b = subprocess.run([shmapc, "compile", path, "-o", exe] + flags, capture_output=True,
                           text=True, timeout=300)
        if b.returncode != 0:
            return "FAIL", "compile failed (status %d):\n%s" % (b.returncode, b.stderr)
        args = golden.program_args(path)
        if "--stats" not in args:
            args = args + ["--stats"]
        r = golden.run_program(exe, path, args, tmp)
    if r.returncode != 0:
        return "FAIL", "the program exited with status %d:\n%s" % (r.returncode, r.stderr)
    actual = table_after(r.stdout, HEADER)
    if actual is None:
        return "FAIL", "the program printed no --stats table"

    static = table_after(report, HEADER)
    if static is not None:
        if static == actual:
            return "ok", ""
        return "FAIL", "the tables differ\n--- --emit=comm\n%s--- --stats\n%s" % (static, actual)

    lo, hi = table_after(report, AT_LEAST), table_after(report, AT_MOST)
    if lo is None or hi is None:
        return "FAIL", "the report has neither a table nor bounds:\n" + report
    lo, hi, got = parse_table(lo), parse_table(hi), parse_table(actual)
    zero = (0, 0, 0)
    for kind in sorted(set(lo) | set(hi) | set(got)):
        a, z, g = lo.get(kind, zero), hi.get(kind, zero), got.get(kind, zero)
        if not all(a[k] <= g[k] <= z[k] for k in range(3)):
            return "FAIL", "%s: --stats %s outside the static bounds %s..%s" % (kind, g, a, z)
    conds = data_dependent_conds(report)
    return "bounds", "data-dependent totals (taken branches, while loops: %s); the --stats " \
        "table lies within the report's bounds" % "; ".join(conds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("programs", nargs="*")
    a = ap.parse_args()
    shmapc = os.path.abspath(a.shmapc) if os.sep in a.shmapc else a.shmapc
    os.chdir(ROOT)
    programs = a.programs or golden.run_programs() + sorted(glob.glob("tests/ir/comm_*.smp"))
    # A program that ends in a runtime error (its golden test checks it) prints no table.
    programs = [p for p in programs if not golden.expects_failure(p)]
    counts = {"ok": 0, "bounds": 0, "FAIL": 0}
    for path in programs:
        status, message = check(shmapc, path)
        counts[status] += 1
        if status == "ok":
            print("ok       %s" % path)
        elif status == "bounds":
            print("skipped  %s (not compared byte for byte): %s" % (path, message))
        else:
            print("FAIL     %s: %s" % (path, message))
    print("%d agree byte for byte, %d skipped as data-dependent (bounds checked), %d failed, "
          "of %d programs" % (counts["ok"], counts["bounds"], counts["FAIL"], len(programs)))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
