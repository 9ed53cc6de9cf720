#!/usr/bin/env python3
"""JAX as the oracle: runs every twin in tests/jax/twins/ and reports per program.

Each twin recomputes, with jax.shard_map on 8 host CPU devices, the values and gradients one
differentiable program of samples/ or tests/run/ prints, and compares them with the program's
.expected file (what the golden tests hold shmapc's output to). Where JAX has no rule or is
wrong (pmax/pmin have no differentiation rule; a cond with a device-varying predicate
deadlocks in JAX's transpose), the twin says so and checks against float64 central finite
differences instead. The runner also fails if a differentiable program has no twin, and
skips a twin whose program is not (or no longer) in the tree.

    PY=$(tests/jax/venv.sh)            # the venv with the pinned jax (created once)
    $PY tests/jax/run_twins.py         # all twins; or name some: ... megatron_mlp grad_cond
    $PY tests/jax/run_twins.py -v      # also the per-label lines of passing twins
"""
import argparse
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# A program is differentiable if it applies a transformation: grad(f), value_and_grad(f),
# vjp(f), jvp(f), check_grads(f, ...), or transpose(f) of a function (followed by a call).
TRANSFORM = re.compile(r"\b(grad|value_and_grad|vjp|jvp)\(\s*[A-Za-z_][\w.]*\s*[,)]"
                       r"|\bcheck_grads\(|\btranspose\(\s*[A-Za-z_][\w.]*\s*\)\(")


def differentiable_programs():
    progs = sorted(glob.glob(os.path.join(ROOT, "samples", "*.smp")) +
                   glob.glob(os.path.join(ROOT, "tests", "run", "*.smp")))
    out = []
    for p in progs:
        with open(p) as f:
            text = "\n".join(line.split("#", 1)[0] for line in f)
        if TRANSFORM.search(text):
            out.append(os.path.splitext(os.path.basename(p))[0])
    return out


def run_twin(python, name, timeout):
    start = time.time()
    try:
        r = subprocess.run([python, os.path.join(HERE, "twins", name + ".py")], cwd=HERE,
                           capture_output=True, text=True, timeout=timeout)
        out, status = r.stdout + r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        out += "\ntimed out after %d s" % timeout
        status = -1
    return name, status, out, time.time() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("twins", nargs="*", help="twin names (default: all)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--timeout", type=int, default=150)
    a = ap.parse_args()
    start = time.time()
    have = sorted(os.path.splitext(os.path.basename(p))[0]
                  for p in glob.glob(os.path.join(HERE, "twins", "*.py")))
    failed = []
    if not a.twins:
        for prog in differentiable_programs():
            if prog not in have:
                print("FAIL %s: a differentiable program without a JAX twin "
                      "(add tests/jax/twins/%s.py)" % (prog, prog))
                failed.append(prog)
    names = a.twins or have
    present = []
    for name in names:
        with open(os.path.join(HERE, "twins", name + ".py")) as f:
            m = re.search(r'^PROGRAM = "([^"]+)"', f.read(), re.M)
        if m and not os.path.exists(os.path.join(ROOT, m.group(1))):
            print("skip %s: %s is not in the tree" % (name, m.group(1)))
        else:
            present.append(name)
    names = present
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        results = list(pool.map(lambda n: run_twin(sys.executable, n, a.timeout), names))
    for name, status, out, secs in results:
        if status == 0:
            print("ok   %s (%.1f s)" % (name, secs))
            if a.verbose:
                sys.stdout.write("".join("       " + l + "\n" for l in out.splitlines()))
        else:
            failed.append(name)
            print("FAIL %s (%.1f s, status %d)" % (name, secs, status))
            sys.stdout.write("".join("       " + l + "\n" for l in out.splitlines()))
    total = len(names) + (len(failed) - sum(1 for n in failed if n in names))
    print("jax twins: %d programs in %.0f s" % (len(names), time.time() - start))
    print("%d passed, %d failed" % (total - len(failed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
