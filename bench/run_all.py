#!/usr/bin/python3
"""Runs every benchmark of bench/*/run.py, collects the JSON record each writes (its rows and
its targets, with the CPU and the git revision), prints one PASS/FAIL line per target row and
exits non-zero when a target fails (unless --no-fail), so that a regression shows the day it
lands. With --quick each benchmark runs at its reduced size and repeat count (a few minutes
in all on a 2-core machine); --write stores the records in bench/results/<cpu>.json, from
which bench/make_readme_table.py writes the README's performance table.

    python3 bench/run_all.py --quick [--write [PATH]] [--only tanh_chain,memory] [--no-fail]

With --only, --write replaces those benchmarks' records in an existing results file and keeps
the others.

On a shared machine a figure is only as good as the quietest of several runs (load moves the
MPI points at 2^14 elements, tens of microseconds a step, by up to 2.7x): a benchmark one of
whose targets fails runs again, alone, up to --again more times (default 1) until none fails,
and the run with the fewest failing targets is kept (the first of equals), its record saying
how many runs were made ("runs"; the README's table says "quietest of N runs"). Every run's
verdicts are printed. A benchmark that fails to run is not run again.

A target line reads PASS or FAIL; "FAIL (waived: ...)" where the project documents that this
machine cannot reach the target (it does not fail the run); "n/a" where the ratio's peer is
not installed here (bench/setup.sh makes JAX and PyTorch). A benchmark that cannot run here
(no mpirun for bench/mpi) is reported as SKIP; one that fails to run is an ERROR and fails
the run."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import ROOT, cpu_info, git_revision  # noqa: E402

# In the order they run; each needs only what its own script checks, except as REQUIRES says.
BENCHMARKS = ["tanh_chain", "compile_time", "train_step", "transformer", "mpi", "memory", "sharded_model", "pipeline",
              "pipeline_transformer",
              "trace"]
REQUIRES = {"mpi": ["mpirun", "mpicc"], "sharded_model": ["mpirun"]}


def cpu_slug(cpu):
    """The results file's name for a CPU: its model, lower case, with its core count."""
    model = re.sub(r"\((r|tm)\)|\bcpu\b|@.*", "", cpu["model"].lower())
    words = re.sub(r"[^a-z0-9]+", "-", model).strip("-")
    return "%s-%dcore" % (words or "unknown", cpu["cores"])


def format_target(t):
    """One target row as run_all prints it (and the README table's cell tells the same)."""
    value = "-" if t["value"] is None else ("%.2f%s" % (t["value"], t["unit"] if t["unit"] == "x" else " " + t["unit"]))
    bound = "%s %g%s" % (t["op"], t["bound"], t["unit"] if t["unit"] == "x" else " " + t["unit"])
    if t["pass"] is None:
        verdict = "n/a (%s)" % (t.get("note") or "peer not installed")
    elif t["pass"]:
        verdict = "PASS"
    else:
        verdict = "FAIL (waived: %s)" % t["waived"] if t.get("waived") else "FAIL"
    return verdict, value, bound


def summary(records):
    """One line per target row (and per benchmark that did not run), and how many of them fail
    the run: a FAIL not waived, or an ERROR."""
    lines, failed = [], 0
    for rec in records:
        if "skipped" in rec or "error" in rec:
            verdict = "SKIP" if "skipped" in rec else "ERROR"
            failed += verdict == "ERROR"
            lines.append("%-5s %-14s %s" % (verdict, rec["benchmark"], rec.get("skipped") or rec.get("error")))
            continue
        for t in rec["targets"]:
            verdict, value, bound = format_target(t)
            failed += t["pass"] is False and not t.get("waived")
            word, _, why = verdict.partition(" ")
            lines.append(("%-5s %-14s %-58s %12s  target %s" % (word, rec["benchmark"], t["name"], value, bound)
                          + ("  " + why if why else "")).rstrip())
    return lines, failed


def failing(rec):
    """How many of a record's targets fail (not waived)."""
    return sum(1 for t in rec.get("targets", []) if t["pass"] is False and not t.get("waived"))


def quietest(runs):
    """Of one benchmark's runs, the record kept: the one with the fewest failing targets, the
    first of equals, with "runs" (how many were made) where there was more than one."""
    best = min(runs, key=failing)  # (min keeps the first of equals)
    return dict(best, runs=len(runs)) if len(runs) > 1 else best


def run_one(name, a, tmp):
    """Runs bench/<name>/run.py; its record, or a record saying why there is none."""
    missing = [tool for tool in REQUIRES.get(name, []) if not shutil.which(tool)]
    if missing:
        return {"benchmark": name, "skipped": "%s not found" % ", ".join(missing)}
    out = os.path.join(tmp, name + ".json")
    cmd = [sys.executable, os.path.join(HERE, name, "run.py"), "--shmapc", a.shmapc, "--json", out]
    cmd += ["--quick"] if a.quick else []
    cmd += ["--repeats", str(a.repeats)] if a.repeats else []
    cmd += ["--target-cpu", a.target_cpu] if a.target_cpu else []
    print("=== bench/%s/run.py%s" % (name, " --quick" if a.quick else ""), flush=True)
    try:
        rc = subprocess.run(cmd, timeout=a.timeout).returncode
    except subprocess.TimeoutExpired:
        return {"benchmark": name, "error": "timed out after %d s" % a.timeout}
    print(flush=True)
    if rc != 0 or not os.path.exists(out):
        return {"benchmark": name, "error": "exit status %d%s" % (rc, "" if rc else ", no record")}
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shmapc", default=os.path.join(ROOT, "build", "compiler", "shmapc"))
    ap.add_argument("--quick", action="store_true", help="each benchmark at its reduced size and repeats")
    ap.add_argument("--repeats", type=int, help="passed on to every benchmark (default: each one's own)")
    ap.add_argument("--only", help="comma-separated benchmarks to run (default: all of %s)" % ", ".join(BENCHMARKS))
    ap.add_argument("--no-fail", action="store_true", help="exit 0 even when a target fails")
    ap.add_argument("--target-cpu", metavar="CPU",
                    help="passed on to every benchmark: shmapc's code for this CPU (e.g. icelake-server on AMD)")
    ap.add_argument("--write", nargs="?", const="", metavar="PATH",
                    help="write the records to PATH (default bench/results/<cpu>.json)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds a benchmark may take (default 1800)")
    ap.add_argument("--again", type=int, default=1, metavar="N",
                    help="run a benchmark with a failing target again, up to N more times, keeping the run with "
                         "the fewest failures (default 1; 0: never)")
    a = ap.parse_args()
    names = a.only.split(",") if a.only else BENCHMARKS
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        ap.error("no benchmark %s (there are: %s)" % (", ".join(unknown), ", ".join(BENCHMARKS)))
    if not os.access(a.shmapc, os.X_OK):
        ap.error("no shmapc at %s (build it, or pass --shmapc)" % a.shmapc)

    # The load when the run began: on a shared machine, the context of every figure it gives.
    load = round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            runs = [run_one(n, a, tmp)]
            while failing(runs[-1]) and len(runs) <= a.again:
                lines, _ = summary(runs[-1:])
                print("=== bench/%s: %d target(s) failed, run %d of at most %d:\n%s" % (
                    n, failing(runs[-1]), len(runs) + 1, a.again + 1,
                    "\n".join(l for l in lines if l.startswith("FAIL") and "(waived" not in l)), flush=True)
                runs.append(run_one(n, a, tmp))
            records.append(quietest(runs))

    cpu = cpu_info()
    print("targets on %s (%s, %d cores), revision %s%s" % (cpu["model"], cpu["vendor"], cpu["cores"],
                                                          git_revision(), ", quick" if a.quick else ""))
    lines, failed = summary(records)
    print("\n".join(lines))

    if a.write is not None:
        path = a.write or os.path.join(HERE, "results", cpu_slug(cpu) + ".json")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if a.only and os.path.exists(path):
            # Some benchmarks rerun: their records replace theirs in the file, the others stay
            # (each record names its own revision, and the table says where it differs).
            with open(path) as f:
                kept = [r for r in json.load(f).get("benchmarks", []) if r["benchmark"] not in names]
            records = sorted(kept + records, key=lambda r: BENCHMARKS.index(r["benchmark"])
                             if r["benchmark"] in BENCHMARKS else len(BENCHMARKS))
        # (the revision before the file is opened: a results file already committed, opened
        # for writing, would make every run "-dirty")
        revision = git_revision()
        with open(path, "w") as f:
            dates = sorted(r["date"] for r in records if "date" in r)
            json.dump({"cpu": cpu, "revision": revision, "quick": a.quick, "load_at_start": load,
                       "date": dates[-1] if dates else None,
                       "benchmarks": records}, f, indent=1)
            f.write("\n")
        print("records written to %s" % os.path.relpath(path))
    if failed:
        print("%d target%s failed%s" % (failed, "s" if failed > 1 else "", " (--no-fail: exit 0)" if a.no_fail else ""))
    return 1 if failed and not a.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
