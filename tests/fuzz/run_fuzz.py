#!/usr/bin/env python3
"""The run mode of the fuzzer: a differential tester that compiles and RUNS mutated programs.

The run programs of the repository (samples/*.smp, tests/run/*.smp) are mutated at the token
level, only in ways that keep a program likely valid:

  number      an integer literal moves by a little (n - 1, n + 1, 2n, n // 2); a float is
              doubled, halved, negated or moved by 1, or becomes an edge of the float types
              (nan, inf, -0.0, 65504, 3.4e38, 1e39, a subnormal)
  collective  an all-reduce becomes another of its family (psum pmean pmax pmin pprod; pand
              por pxor), a rooted reduce's op="sum" another op
  mesh        a mesh axis size becomes 1, 2, 3, 4 or 8, and (half the time) every other
              integer literal equal to the old size becomes the new one too, so the shapes
              written for it follow
  trip        a loop's trip count (`range(N)`, `range(A, B)`'s B) becomes 0, 1, N - 1, N + 1
              or 2N
  flag        `true` and `false` swap (tiled=, check_vma=, conditions)

A mutant `shmapc check` refuses (status 1) is dropped. Each accepted one is compiled for the
threaded runtime and, where mpirun is available, with --mpi; it runs on threads (on every
core, and pinned to one with taskset), and under `mpirun --allow-run-as-root --oversubscribe`
in one of tests/mpi/run_golden.py's layouts, drawn: `-np N` (N: the mesh's device count, 2
without a mesh), or N / D ranks of D devices each over TCP; a quarter of the MPI runs cut every
transfer into messages of at most 7 bytes (SHMAP_MPI_MAX_MESSAGE). A program whose meshes
differ in size runs on threads only. A find is:

  - `shmapc check` or `shmapc compile` killed by a signal or exiting with another status than
    0 or 1, or compile refusing (status 1) what check accepted;
  - a run killed by a signal, exiting with a status other than 0, 1 or 2, exiting 2 without a
    `shmap runtime error:` line, or a collective waiting for its group past
    SHMAP_COLLECTIVE_TIMEOUT (2/3 of --timeout): a deadlock;
  - one run (threaded or MPI) still running after --timeout seconds where the other ended (a
    run past it both ways is most likely the mutant's own endless loop, as a while whose body
    no longer moves toward its end: printed as TIMEOUT, not counted);
  - the MPI run's stdout differing from the threaded run's, or one failing where the other
    did not (docs/runtime.md: the output is byte-identical), or a `shmap runtime error:` of
    the threaded run that no rank reports; the one-core run's stdout or status differing
    from the run on every core.

    tests/fuzz/run_fuzz.py --shmapc build/compiler/shmapc --seconds 300 --seed 1 --keep finds/
    tests/fuzz/run_fuzz.py --shmapc build/compiler/shmapc --count 4 samples/psum.smp

--keep DIR saves each find as DIR/find-N.smp (run it from the original program's folder, or
with its data/ beside it: the note names it) with DIR/find-N.txt saying what differed and the
commands. Exit status: 0 when nothing was found, 1 when something was. Python stdlib only.
"""
import argparse
import difflib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "mpi"))
import golden  # noqa: E402
import run_golden  # noqa: E402

MPIRUN = run_golden.MPIRUN  # mpirun as root, oversubscribed, ranks comparing collectives

# ---- The token-level mutator

TOKEN = re.compile(r"""(?P<comment>\#[^\n]*)|(?P<string>"(?:\\.|[^"\\\n])*")|"""
                   r"""(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)|(?P<ident>[A-Za-z_]\w*)|(?P<space>\s+)|(?P<punct>.)""",
                   re.S)
FAMILIES = [("psum", "pmean", "pmax", "pmin", "pprod"), ("pand", "por", "pxor")]
REDUCE_OPS = ('"sum"', '"mean"', '"max"', '"min"', '"prod"')
# nan, infinities, -0.0, f16's largest and smallest normal, bf16 / f32 overflow, a subnormal
EXTREME_FLOATS = ("(0.0 / 0.0)", "(1.0 / 0.0)", "(-1.0 / 0.0)", "(-0.0)", "65504.0", "6.1e-05", "3.4e38", "1e39",
                  "1e-40", "0.0")


class Tok:
    def __init__(self, kind, text, start):
        self.kind, self.text, self.start = kind, text, start

    def __repr__(self):
        return "%s %r" % (self.kind, self.text)


def tokenize(text):
    return [Tok(m.lastgroup, m.group(), m.start()) for m in TOKEN.finditer(text)]


def code(tokens):
    """Indices of the tokens that are not space or comments."""
    return [i for i, t in enumerate(tokens) if t.kind not in ("space", "comment")]


def is_int(t):
    return t.kind == "number" and re.fullmatch(r"\d+", t.text) is not None


def mesh_axis_sizes(tokens):
    """Token indices of the axis sizes in `mesh NAME = <["x"=2, ...]>` declarations."""
    out, c = [], code(tokens)
    for k, i in enumerate(c):
        if tokens[i].text != "mesh":
            continue
        for j in c[k + 1:]:
            if tokens[j].text == ";":
                break
            if is_int(tokens[j]) and tokens[c[c.index(j) - 1]].text == "=":
                out.append(j)
    return out


def trip_counts(tokens):
    """Token indices of the last integer bound of each `range(...)`."""
    out, c = [], code(tokens)
    for k, i in enumerate(c):
        if tokens[i].text == "range" and k + 1 < len(c) and tokens[c[k + 1]].text == "(":
            last = None
            for j in c[k + 2:]:
                if tokens[j].text == ")":
                    break
                if is_int(tokens[j]):
                    last = j
            if last is not None:
                out.append(last)
    return out


def mutate_once(tokens, rng):
    """One mutation in place; returns its description, or None if the kind drawn does not apply."""
    kind = rng.choice(["number", "number", "collective", "mesh", "trip", "flag"])
    c = code(tokens)
    if kind == "number":
        # (a float negated earlier reads `(-1.5)`: no longer a literal to move)
        nums = [i for i in c if tokens[i].kind == "number" and re.fullmatch(r"[\d.eE+-]+", tokens[i].text)]
        if not nums:
            return None
        i = rng.choice(nums)
        old = tokens[i].text
        if is_int(tokens[i]):
            n = int(old)
            new = str(max(0, rng.choice([n - 1, n + 1, 2 * n, n // 2])))
        elif rng.random() < 0.3:  # an edge of the float types (floats are values, rarely shapes)
            new = rng.choice(EXTREME_FLOATS)
        else:
            x = float(old)
            new = repr(rng.choice([2 * x, x / 2, x + 1, x - 1, -x]))
            new = new if re.fullmatch(r"\d+(\.\d*)?(e[+-]?\d+)?", new) else "(%s)" % new
        tokens[i].text = new
    elif kind == "collective":
        cands = [(i, f) for i in c for f in FAMILIES if tokens[i].text in f]
        cands += [(i, REDUCE_OPS) for i in c if tokens[i].text in REDUCE_OPS]
        if not cands:
            return None
        i, family = rng.choice(cands)
        old, new = tokens[i].text, rng.choice([f for f in family if f != tokens[i].text])
        tokens[i].text = new
    elif kind == "mesh":
        sizes = mesh_axis_sizes(tokens)
        if not sizes:
            return None
        i = rng.choice(sizes)
        old, new = tokens[i].text, rng.choice([s for s in ("1", "2", "3", "4", "8") if s != tokens[i].text])
        tokens[i].text = new
        if rng.random() < 0.5:
            for j in c:
                if j != i and is_int(tokens[j]) and tokens[j].text == old:
                    tokens[j].text = new
            return "mesh: line %d: axis size %s -> %s, and every literal %s" % (
                "".join(t.text for t in tokens[:i]).count("\n") + 1, old, new, old)
    elif kind == "trip":
        trips = trip_counts(tokens)
        if not trips:
            return None
        i = rng.choice(trips)
        old = tokens[i].text
        n = int(old)
        new = str(rng.choice([0, 1, max(0, n - 1), n + 1, 2 * n]))
        tokens[i].text = new
    else:
        flags = [i for i in c if tokens[i].text in ("true", "false")]
        if not flags:
            return None
        i = rng.choice(flags)
        old = tokens[i].text
        new = "false" if old == "true" else "true"
        tokens[i].text = new
    if old == new:
        return None
    line = "".join(t.text for t in tokens[:i]).count("\n") + 1
    return "%s: line %d: %s -> %s" % (kind, line, old, new)


def mutate(text, rng):
    """(the mutant, the mutations' descriptions): one to three mutations."""
    tokens = tokenize(text)
    done = []
    for _ in range(20):
        if len(done) >= rng.choice([1, 1, 2, 3]):
            break
        d = mutate_once(tokens, rng)
        if d:
            done.append(d)
    return "".join(t.text for t in tokens), done


# ---- Running

class Result:
    def __init__(self, status, stdout, stderr, timed_out):
        self.status, self.stdout, self.stderr, self.timed_out = status, stdout, stderr, timed_out


def run(cmd, timeout, cwd=None, env=None):
    """Runs cmd in a session of its own, so a timeout kills it and everything it started (the
    ranks mpirun started, a program's threads)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return Result(p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), False)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return Result(None, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), True)


def tool_problem(what, r):
    """What is wrong with a run of shmapc (status 0 or 1 are its answers), or None."""
    if r.timed_out:
        return "%s did not finish (a hang?)" % what
    if r.status < 0:
        return "%s was killed by signal %d" % (what, -r.status)
    if r.status not in (0, 1):
        return "%s exited with status %d (an internal error)" % (what, r.status)
    return None


RUNTIME_ERROR = re.compile(r"^shmap runtime error: ", re.M)
STUCK = re.compile(r"a collective has waited [0-9.]+ s for its group")


def run_problem(what, r, mpi=False):
    """What is wrong with a program's run, or None: a signal, a status other than 0 / 1 / 2,
    status 2 without the runtime's message, a hang."""
    if r.timed_out:
        return "%s: still running after the timeout (a hang?)" % what
    if r.status < 0:
        return "%s: killed by signal %d" % (what, -r.status)
    if mpi and re.search(r"exited on signal|signal \d+ \(", r.stderr):
        return "%s: a rank was killed by a signal" % what
    if r.status not in (0, 1, 2):
        return "%s: exit status %d" % (what, r.status)
    if STUCK.search(r.stderr):
        return "%s: a collective waited for its group past SHMAP_COLLECTIVE_TIMEOUT (a deadlock?)" % what
    if r.status == 2 and not RUNTIME_ERROR.search(r.stderr):
        return "%s: exit status 2 without a `shmap runtime error:` line" % what
    return None


def link_modules(text, origin, tmp):
    """Links the modules the program imports from its own folder into tmp (stdlib modules
    resolve without it)."""
    for name in re.findall(r"^\s*import\s+([\w.]+)\s*;", text, re.M):
        src = os.path.join(os.path.dirname(os.path.abspath(origin)), *name.split(".")) + ".smp"
        dst = os.path.join(tmp, *name.split(".")) + ".smp"
        if os.path.exists(src) and not os.path.exists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.symlink(src, dst)


class Tester:
    def __init__(self, a):
        self.a = a
        self.shmapc = os.path.abspath(a.shmapc)
        self.mpi = not a.no_mpi and shutil.which("mpirun") is not None
        self.finds = 0
        self.counts = {"mutants": 0, "refused by check": 0, "ran": 0, "ran under mpirun": 0,
                       "past the timeout (endless?)": 0}

    def report(self, origin, mutations, text, problems, log):
        self.finds += 1
        print("FIND %d: %s mutated (%s)\n  %s" % (self.finds, origin, "; ".join(mutations), "\n  ".join(problems)),
              flush=True)
        if self.a.keep:
            os.makedirs(self.a.keep, exist_ok=True)
            base = os.path.join(self.a.keep, "find-%d" % self.finds)
            with open(base + ".smp", "w") as f:
                f.write(text)
            with open(base + ".txt", "w") as f:
                f.write("from %s (its data/ and modules beside it), mutated: %s\n\n%s\n\n%s\n" % (
                    origin, "; ".join(mutations), "\n".join(problems), log))
            print("  saved %s.smp and %s.txt" % (base, base), flush=True)

    def test(self, origin, text, mutations, rng):
        """Checks, compiles and runs one mutant (rng draws the MPI layout), reporting what it finds."""
        self.counts["mutants"] += 1
        tmp = tempfile.mkdtemp(prefix="run_fuzz.")
        try:
            return self._test(origin, text, mutations, tmp, rng)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _test(self, origin, text, mutations, tmp, rng):
        prog = os.path.join(tmp, "mutant.smp")
        with open(prog, "w") as f:
            f.write(text)
        link_modules(text, origin, tmp)
        flags, args = golden.compile_flags(prog), golden.program_args(prog)
        log = []

        def step(what, cmd, timeout, cwd=None):
            r = run(cmd, timeout, cwd)
            log.append("$ %s\n[status %s%s]\n%s%s" % (" ".join(cmd), r.status, ", timed out" if r.timed_out else "",
                                                      r.stdout[-3000:], r.stderr[-3000:]))
            return r

        r = step("check", [self.shmapc, "check", "--verify-each", prog] + flags, 120)
        problem = tool_problem("shmapc check", r)
        if problem:
            return self.report(origin, mutations, text, [problem], "\n".join(log))
        if r.status == 1:
            self.counts["refused by check"] += 1
            return
        exe = os.path.join(tmp, "prog")
        r = step("compile", [self.shmapc, "compile", "--verify-each", prog, "-o", exe] + flags, 300)
        problem = tool_problem("shmapc compile", r) or (
            "shmapc compile refused (status 1) what shmapc check accepted" if r.status == 1 else None)
        if problem:
            return self.report(origin, mutations, text, [problem], "\n".join(log))
        workdir = tempfile.mkdtemp(dir=tmp)
        golden.link_data(origin, workdir)
        threaded = step("threaded", [exe] + args, self.a.timeout, workdir)
        self.counts["ran"] += 1
        # A run past the timeout is compared with the MPI run before it counts: a mutant may
        # loop forever by itself (a while whose body no longer moves it toward its end).
        problems = [p for p in [run_problem("threaded run", threaded)] if p and not threaded.timed_out]
        cores = sorted(os.sched_getaffinity(0))
        if not problems and not threaded.timed_out and len(cores) > 1 and shutil.which("taskset"):
            # Results never depend on the number of cores (docs/runtime.md).
            owork = tempfile.mkdtemp(dir=tmp)
            golden.link_data(origin, owork)
            one = step("one core", ["taskset", "-c", str(cores[0]), exe] + args, self.a.timeout, owork)
            # (on one core, a long run may pass the timeout: then it is not compared)
            problems += [p for p in [run_problem("threaded run on one core", one)] if p and not one.timed_out]
            if not problems and not one.timed_out and (one.stdout != threaded.stdout or one.status != threaded.status):
                problems.append("threaded run on one core (taskset -c %d): status %d (on %d cores: %d), stdout %s" % (
                    cores[0], one.status, len(cores), threaded.status,
                    "differs" if one.stdout != threaded.stdout else "the same"))
        layouts = run_golden.layouts(prog)
        m = None
        if self.mpi and layouts and not problems:
            # One device per rank, or several per rank over TCP (as tests/mpi/run_golden.py);
            # a quarter of the time with every transfer cut in messages of at most 7 bytes.
            ranks, per_rank, mca = rng.choice(layouts)
            extra = (["--devices-per-rank=%d" % per_rank] if per_rank > 1 else [])
            small = ["-x", "SHMAP_MPI_MAX_MESSAGE=7"] if rng.random() < 0.25 else []
            mexe = os.path.join(tmp, "prog_mpi")
            r = step("compile --mpi", [self.shmapc, "compile", prog, "--mpi", "-o", mexe] + flags, 300)
            problem = tool_problem("shmapc compile --mpi", r) or (
                "shmapc compile --mpi refused (status 1) what shmapc check accepted" if r.status == 1 else None)
            if problem:
                problems.append(problem)
            else:
                mworkdir = tempfile.mkdtemp(dir=tmp)
                golden.link_data(origin, mworkdir)
                m = step("mpi", MPIRUN + small + mca + ["-np", str(ranks), mexe] + args + extra, self.a.timeout + 30,
                         mworkdir)
                self.counts["ran under mpirun"] += 1
                layout = " ".join(["mpirun"] + small + mca + ["-np", str(ranks)] + extra)
                problem = run_problem(layout, m, mpi=True)
                if threaded.timed_out or m.timed_out:
                    if not (threaded.timed_out and m.timed_out):
                        problems.append("%s past the timeout, but not %s" % (
                            ("the threaded run", layout) if threaded.timed_out else (layout, "the threaded run")))
                elif problem:
                    problems.append(problem)
                elif m.stdout != threaded.stdout or (m.status != 0) != (threaded.status != 0):
                    problems.append("%s: status %d (threaded: %d), stdout %s the threaded run's\n%s" % (
                        layout, m.status, threaded.status, "differs from" if m.stdout != threaded.stdout else "is",
                        "".join(difflib.unified_diff(threaded.stdout.splitlines(True), m.stdout.splitlines(True),
                                                     "threaded", "mpi"))[:3000]))
                elif threaded.status != 0:
                    prefix = "shmap runtime error: "
                    for line in threaded.stderr.splitlines():
                        ranked = re.escape(prefix) + r"rank \d+: " + re.escape(line[len(prefix):])
                        if line.startswith(prefix) and not re.search(ranked, m.stderr):
                            problems.append("%s: no rank reported: %s" % (layout, line))
        if threaded.timed_out and not problems:
            # (both runs, or the only one): most likely the mutant's own endless loop; a
            # collective that waits forever would have ended in SHMAP_COLLECTIVE_TIMEOUT's report
            self.counts["past the timeout (endless?)"] += 1
            print("TIMEOUT (not counted as a find: %s): %s mutated (%s)" % (
                "the MPI run too" if m else "not compared", origin, "; ".join(mutations)), flush=True)
        if problems:
            self.report(origin, mutations, text, problems, "\n".join(log))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shmapc", default=os.path.join(ROOT, "build", "compiler", "shmapc"))
    ap.add_argument("--seconds", type=float, default=60, help="stop starting mutants after this long")
    ap.add_argument("--count", type=int, help="stop after this many mutants")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", help="folder for the finds")
    ap.add_argument("--timeout", type=float, default=30,
                    help="seconds a run may take (SHMAP_COLLECTIVE_TIMEOUT is 2/3 of it)")
    ap.add_argument("--no-mpi", action="store_true", help="threaded runs only")
    ap.add_argument("programs", nargs="*", help="programs to mutate (default: samples/ and tests/run/)")
    a = ap.parse_args()
    # A collective that waits forever ends in the watchdog's report (a find), before the timeout.
    os.environ["SHMAP_COLLECTIVE_TIMEOUT"] = "%g" % max(1, int(a.timeout * 2 / 3))
    MPIRUN.extend(["-x", "SHMAP_COLLECTIVE_TIMEOUT"])
    os.chdir(ROOT)
    programs = a.programs or golden.run_programs()
    tester = Tester(a)
    rng = random.Random(a.seed)
    start = time.monotonic()
    print("run_fuzz: %d programs, seed %d, %s" % (len(programs), a.seed,
                                                    "threads and mpirun" if tester.mpi else "threads only"), flush=True)
    while time.monotonic() - start < a.seconds and (a.count is None or tester.counts["mutants"] < a.count):
        origin = rng.choice(programs)
        with open(origin) as f:
            text, mutations = mutate(f.read(), rng)
        if not mutations:
            continue
        tester.test(origin, text, mutations, random.Random(rng.random()))
    print("run_fuzz: %.0f s, %s, %d finds" % (time.monotonic() - start, ", ".join(
        "%d %s" % (v, k) for k, v in tester.counts.items()), tester.finds))
    return 1 if tester.finds else 0


if __name__ == "__main__":
    sys.exit(main())
