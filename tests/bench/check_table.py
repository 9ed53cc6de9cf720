#!/usr/bin/python3
"""Tests of bench/make_readme_table.py on the results fixture beside this script (two CPUs,
written by hand): the table it prints is expected_table.md (each cell worked out by hand from
the fixture), it writes that table between a README's markers and leaves the rest alone,
--check passes on the README it wrote and fails on one figure changed, and bad input (no
markers, a file that is not a results file) gives a clear error, not a traceback. Also
bench/run_all.py's results-file names and that every benchmark script takes --quick and
--json. Runs no benchmark."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "bench", "make_readme_table.py")
FIXTURE = os.path.join(HERE, "fixture")
failures = []


def run_tool(*args):
    return subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True)


def check(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print("FAIL: %s\n%s" % (what, detail))


def main():
    with open(os.path.join(HERE, "expected_table.md")) as f:
        expected = f.read()
    p = run_tool("--results", FIXTURE, "--print")
    check("--print gives expected_table.md", p.returncode == 0 and p.stdout == expected, p.stdout + p.stderr)

    with tempfile.TemporaryDirectory() as tmp:
        readme = os.path.join(tmp, "README.md")
        before = "# title\n\nprose before\n\n<!-- bench-table:begin -->\n"
        after = "<!-- bench-table:end -->\n\nprose after\n"
        with open(readme, "w") as f:
            f.write(before + "| stale | 1.0x |\n" + after)
        p = run_tool("--results", FIXTURE, "--readme", readme, "--check")
        check("--check fails on a stale table", p.returncode == 1 and "run bench/make_readme_table.py" in p.stdout,
              p.stdout + p.stderr)
        p = run_tool("--results", FIXTURE, "--readme", readme)
        with open(readme) as f:
            text = f.read()
        check("the table is written between the markers, the rest kept",
              p.returncode == 0 and text == before + expected + after, text + p.stderr)
        p = run_tool("--results", FIXTURE, "--readme", readme, "--check")
        check("--check passes on the README it wrote", p.returncode == 0, p.stdout + p.stderr)
        with open(readme, "w") as f:
            f.write(text.replace("4.40x PASS", "4.50x PASS"))
        p = run_tool("--results", FIXTURE, "--readme", readme, "--check")
        check("--check fails on one figure changed by hand", p.returncode == 1 and "-| compile_time" in p.stdout,
              p.stdout + p.stderr)

        with open(readme, "w") as f:
            f.write("# no markers\n")
        p = run_tool("--results", FIXTURE, "--readme", readme)
        check("a README without markers is a clear error",
              p.returncode != 0 and "bench-table:begin" in p.stderr and "Traceback" not in p.stderr, p.stderr)

        bad = os.path.join(tmp, "bad")
        os.mkdir(bad)
        shutil.copy(os.path.join(FIXTURE, "amd-epyc-7b13-2core.json"), bad)
        with open(os.path.join(bad, "other.json"), "w") as f:
            f.write('{"rows": []}\n')
        p = run_tool("--results", bad, "--print")
        check("a JSON file that is not a results file is a clear error",
              p.returncode != 0 and "other.json" in p.stderr and "Traceback" not in p.stderr, p.stderr)

        empty = os.path.join(tmp, "empty")
        os.mkdir(empty)
        p = run_tool("--results", empty, "--print")
        check("no results files: the table says how to make them",
              p.returncode == 0 and "No results yet" in p.stdout, p.stdout + p.stderr)

    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import json  # noqa: E402
    from run_all import BENCHMARKS, cpu_slug, quietest, summary  # noqa: E402
    records = []
    for name in sorted(os.listdir(FIXTURE)):
        with open(os.path.join(FIXTURE, name)) as f:
            records += json.load(f)["benchmarks"]
    records.append({"benchmark": "memory", "error": "exit status 1"})
    lines, failed = summary(records)
    verdicts = [(l.split()[0], l.split()[1]) for l in lines]
    # By hand from the fixture: the AMD file's mpi (skipped), compile_time (PASS), tanh_chain
    # (PASS); the Intel file's mpi (PASS), tanh_chain (FAIL), train_step (waived FAIL, n/a,
    # PASS); the error added above.
    check("run_all's verdicts", verdicts == [("SKIP", "mpi"), ("PASS", "compile_time"), ("PASS", "tanh_chain"),
                                             ("PASS", "mpi"), ("FAIL", "tanh_chain"), ("FAIL", "train_step"),
                                             ("n/a", "train_step"), ("PASS", "train_step"), ("ERROR", "memory")],
          "\n".join(lines))
    check("run_all fails on the FAIL and the ERROR, not on the waived FAIL, n/a or SKIP", failed == 2,
          "failed = %d" % failed)
    check("a waived FAIL says why", "waived: hand-written C, batch 128 / 256: 0.61x" in lines[5], lines[5])
    # --again: of a benchmark's runs, the one with the fewest failing targets (not counting a
    # waived one), the first of equals, saying how many runs were made; the table says so.
    def run(*verdicts):
        return {"benchmark": "mpi", "revision": "r", "targets": [
            {"name": "t%d" % k, "value": 1.0, "unit": "x", "op": "<=", "bound": 1.1, "pass": v != "FAIL",
             **({"waived": "why"} if v == "waived" else {})} for k, v in enumerate(verdicts)]}
    runs = [run("FAIL", "FAIL"), run("PASS", "FAIL"), run("FAIL", "waived"), run("PASS", "PASS")]
    check("quietest keeps the run with the fewest failures, the first of equals",
          quietest(runs[:3]) == dict(runs[1], runs=3) and quietest(runs) == dict(runs[3], runs=4)
          and quietest(runs[3:]) == runs[3], repr(quietest(runs[:3])))
    with tempfile.TemporaryDirectory() as tmp:
        for name in os.listdir(FIXTURE):
            with open(os.path.join(FIXTURE, name)) as f:
                res = json.load(f)
            for rec in res["benchmarks"]:
                if rec["benchmark"] == "tanh_chain":
                    rec["runs"] = 3
            with open(os.path.join(tmp, name), "w") as f:
                json.dump(res, f)
        p = run_tool("--results", tmp, "--print")
        # (the fixture's tanh_chain cells with a figure: its target and its shmapc row in both
        # columns, numpy in the Intel one; a peer not installed has no figure and no note)
        said = [(l.split(" | ")[1], l.count("quietest of 3 runs")) for l in p.stdout.splitlines() if "quietest of" in l]
        check("a record kept from several runs says so in each of its cells",
              p.returncode == 0 and said == [("tanh chain per stage / C with vector tanhf", 2), ("shmapc", 2),
                                             ("numpy", 1)], p.stdout + p.stderr)
    for model, cores, slug in (("Intel(R) Xeon(R) Processor", 2, "intel-xeon-processor-2core"),
                               ("AMD EPYC 7B13 64-Core Processor", 2, "amd-epyc-7b13-64-core-processor-2core"),
                               ("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", 12, "intel-core-i7-8700-12core")):
        got = cpu_slug({"model": model, "cores": cores})
        check("cpu_slug(%r)" % model, got == slug, "got %r, expected %r" % (got, slug))
    for name in BENCHMARKS:
        p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", name, "run.py"), "--help"],
                           capture_output=True, text=True)
        check("bench/%s/run.py takes --quick and --json" % name,
              p.returncode == 0 and "--quick" in p.stdout and "--json" in p.stdout, p.stdout + p.stderr)

    print("%d failed" % len(failures) if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
