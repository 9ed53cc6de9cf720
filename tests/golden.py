#!/usr/bin/env python3
"""Golden tests: each program has its expected output beside it.

  run     PROG.smp  -> compiled, run; stdout (and the exit status and stderr if the status is
                       not 0) must match PROG.expected: every line the same, except the float
                       values of `print` output (f32, f64, f16, bf16), which may differ within
                       the tolerance below (FLOAT_RTOL; docs/numerics.md, "What may differ
                       across machines"). A leading comment `# ARGS: --stats` passes arguments
                       to the program, `# FLAGS: ...` flags to shmapc; the environment variable
                       SHMAPC_EXTRA_FLAGS adds flags to every compile (--target-cpu=x86-64-v3).
  error   PROG.smp  -> `shmapc check` must exit 1; stderr must equal PROG.expected byte for byte.

Both compile with --verify-each: after sema and after every pass, the IR verifier checks the
structure and every equation against its primitive's shape rule (compiler/prims/), so an
ill-typed equation any pass builds fails the test as an internal error.

--cores runs each run program twice, pinned to one core (`taskset -c 0`) and on every core this
process may use, and requires the two outputs to be identical byte for byte (docs/runtime.md:
results never depend on the number of cores); it does not read the expected files.

--skip-if-cpu-lacks exits 77 (CTest's "skipped") without testing anything when this CPU cannot
run what SHMAPC_EXTRA_FLAGS's --target-cpu compiles (a probe program's start-up check says so).

--update rewrites the expected files that differ (a run program's output within the float
tolerance of its expected file leaves it as it is), but refuses (exit status 1, naming the
program and why) to record a failure of the harness's own: an error program that did not exit
1, a run program that did not compile, was killed by a signal, or exited 2 or more without the
runtime's `shmap runtime error:`, or any output holding harness failure text (HARNESS_FAILURE:
a sanitizer report, a segfault, a Python traceback, an internal error). Without --update, an
expected file holding such text fails its test.

Paths in diagnostics are relative to the repository root, so the runner works from there.

  golden.py --shmapc BUILD/compiler/shmapc run samples/psum.smp
  golden.py --shmapc BUILD/compiler/shmapc --cores run samples/*.smp
  golden.py --shmapc BUILD/compiler/shmapc --update all     # regenerate every expectation
"""
import argparse
import difflib
import glob
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# How far a printed float may be from the expected one, per dtype (the one place this is
# stated; docs/numerics.md, "What may differ across machines", explains the choice). Element
# a of an expected array, b of the actual one, M the largest finite |value| of the two arrays:
#
#     |a - b| <= rtol * max(|a|, |b|) + rtol * M
#
# relative to the element, plus an absolute slack scaled to the array, so a value that is the
# small difference of larger ones (near zero inside an O(1) array) may move as much as its
# neighbours do. nan must print as nan, and inf / -inf exactly as expected.
FLOAT_RTOL = {
    "f32": 5e-5,        # 2.4x the largest difference measured (2.1e-5)
    "f64": 1e-5,        # one unit in the 6th printed digit
    "bf16": 2.0 ** -8,  # one bf16 ulp (8 significant bits)
    "f16": 2.0 ** -10,  # one f16 ulp (11 significant bits) and the printed digits' rounding
}

# Text that only a broken run or the harness itself writes: an expected file must never hold it.
HARNESS_FAILURE = re.compile("|".join([
    r"^expected exit status \d+, got -?\d+$",       # this script's own message for an error test
    r"^compile failed \(status -?\d+\)",            # ... and for a run test that did not compile
    r"^\[exit status -\d+\]",                       # killed by a signal
    r"^Traceback \(most recent call last\)",
    r"Segmentation fault|core dumped|Bus error|Illegal instruction|Floating point exception",
    r"AddressSanitizer|LeakSanitizer|ThreadSanitizer|MemorySanitizer|UndefinedBehaviorSanitizer",
    r"^\S+:\d+:\d+: runtime error: ",               # UBSan (not the runtime's `shmap runtime error:`)
    r"internal error",                              # shmapc: internal error: ...
    r"^terminate called ",                          # an uncaught C++ exception
    r"^LLVM ERROR: |^Stack dump:|PLEASE submit a bug report",
    r"output differs from \S+\.expected",           # a failing test's report pasted in
]), re.M)


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


def run_program(exe, path, args, tmp, prefix=()):
    """Runs a compiled program in the empty directory `tmp` (what it saves lands there), with
    the program folder's data/ linked in; `prefix` is a command to run it under (taskset)."""
    link_data(path, tmp)
    return subprocess.run(list(prefix) + [exe] + args, capture_output=True, text=True, timeout=300, cwd=tmp)


def expects_failure(path):
    """Whether the program's expected output ends in a nonzero exit status."""
    expected = os.path.splitext(path)[0] + ".expected"
    return os.path.exists(expected) and "\n[exit status " in "\n" + open(expected).read()


def run_output(r):
    """A run's output as the expected files record it: stdout, then, if the status is not 0,
    `[exit status N]` and stderr."""
    out = r.stdout
    if r.returncode != 0:
        out += "[exit status %d]\n%s" % (r.returncode, r.stderr)
    return out


class Compiled:
    """A run program compiled into a temporary directory (a context manager); `.error` is the
    compiler's failure text, or None."""

    def __init__(self, shmapc, path, flags=()):
        self.tmp = tempfile.mkdtemp()
        self.exe = os.path.join(self.tmp, "prog")
        self.path = path
        c = subprocess.run([shmapc, "compile", path, "-o", self.exe, "--verify-each"] + list(flags)
                           + compile_flags(path) + os.environ.get("SHMAPC_EXTRA_FLAGS", "").split(),
                           capture_output=True, text=True, timeout=300)
        self.error = None if c.returncode == 0 else "compile failed (status %d):\n%s" % (c.returncode, c.stderr)

    def run(self, args=None, prefix=()):
        """Runs it in a fresh directory of its own: the subprocess.CompletedProcess."""
        self.workdir = tempfile.mkdtemp(dir=self.tmp)
        return run_program(self.exe, self.path, program_args(self.path) if args is None else args, self.workdir,
                           prefix)

    def saved_files(self):
        """{name: contents} of the files the last run wrote into its directory."""
        files = {}
        for folder, dirs, names in os.walk(self.workdir):
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
            for name in names:
                full = os.path.join(folder, name)
                if not os.path.islink(full):
                    with open(full, "rb") as f:
                        files[os.path.relpath(full, self.workdir)] = f.read()
        return files

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.tmp, ignore_errors=True)


def actual_run(shmapc, path):
    """(the output as the expected file records it, why it must not become an expectation or
    None)."""
    with Compiled(shmapc, path) as c:
        if c.error:
            return c.error, "it did not compile"
        r = c.run()
        return run_output(r), run_refusal(r.returncode, r.stderr, expected_text(path))


def run_refusal(status, stderr, expected):
    """Why a run program's output with this exit status and stderr must not become its
    expectation (the program crashed), or None. Intended failures are kept: status 1 (a bad
    program argument), status 2 with the runtime's `shmap runtime error:`, and a status the
    current expected output records."""
    if status < 0:
        return "it was killed by signal %d" % -status
    if status >= 2 and not re.search(r"^shmap runtime error: ", stderr, re.M):
        if "\n[exit status %d]\n" % status not in "\n" + expected:
            return ("it exited with status %d without `shmap runtime error:` (a crash?), a status its expected "
                    "output does not record" % status)
    return None


def actual_error(shmapc, path):
    r = subprocess.run([shmapc, "check", path, "--verify-each"] + compile_flags(path), capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 1:
        return ("expected exit status 1, got %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr),
                "an error program must exit 1 (a user error), it exited %d" % r.returncode)
    if not r.stderr.strip():
        return r.stderr, "it exited 1 without a diagnostic"
    return r.stderr, None


def expected_text(path):
    p = os.path.splitext(path)[0] + ".expected"
    return open(p).read() if os.path.exists(p) else ""


def harness_failure(text):
    """The first line of `text` that is harness failure text, or None."""
    m = HARNESS_FAILURE.search(text)
    if not m:
        return None
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.start())
    return text[start:end if end >= 0 else len(text)]


# ---- Comparing outputs: print blocks with a tolerance for floats, everything else exactly.

FLOAT_DTYPES = ("f32", "f64", "f16", "bf16")
_HEADER = re.compile(r"^(?P<head>(?:.*: )?(?P<dtype>f32|f64|f16|bf16|i32|i64|bool)\[(?P<dims>(?:\d+(?:,\d+)*)?)\])"
                     r"(?: = (?P<value>.*))?$")
_ELEMENT = {
    "float": re.compile(r"^-?(?:nan|inf|\d+(?:\.\d+)?(?:e[+-]\d+)?)$"),
    "i32": re.compile(r"^-?\d+$"),
    "i64": re.compile(r"^-?\d+$"),
    "bool": re.compile(r"^(?:true|false)$"),
}
_ROW = re.compile(r"^( *)(\[+)(.*?)(\]+)(,?)$")


def _element_re(dtype):
    return _ELEMENT["float" if dtype in FLOAT_DTYPES else dtype]


class Block:
    """One line of free text (dtype None), or one `print`: its header (label, dtype, dims), the
    skeleton of each of its lines (the text with every element replaced by {}) and the
    elements, in row-major order."""

    def __init__(self, line_no, lines, dtype=None, head=None, skeleton=None, elements=None):
        self.line_no, self.lines, self.dtype, self.head = line_no, lines, dtype, head
        self.skeleton, self.elements = skeleton or [], elements or []


def _parse_print(lines, i):
    """The print block starting at lines[i], or None if lines[i] does not start one."""
    m = _HEADER.match(lines[i])
    if not m:
        return None
    dtype = m.group("dtype")
    dims = [int(d) for d in m.group("dims").split(",")] if m.group("dims") else []
    element = _element_re(dtype)
    if not dims:
        value = m.group("value")
        if value is None or not element.match(value):
            return None
        return Block(i + 1, [lines[i]], dtype, m.group("head"), [m.group("head") + " = {}"], [value])
    if m.group("value") is not None:
        return None
    n = math.prod(dims)
    rows = n // dims[-1] if n else 1
    if i + 1 + rows > len(lines):
        return None
    skeleton, elements = [m.group("head")], []
    for line in lines[i + 1:i + 1 + rows]:
        r = _ROW.match(line)
        if not r:
            return None
        items = r.group(3).split(", ") if n else []
        if n and len(items) != dims[-1] or (not n and r.group(3)):
            return None
        if not all(element.match(x) for x in items):
            return None
        elements += items
        skeleton.append(r.group(1) + r.group(2) + ", ".join("{}" for _ in items) + r.group(4) + r.group(5))
    return Block(i + 1, lines[i:i + 1 + rows], dtype, m.group("head"), skeleton, elements)


def parse_output(text):
    """The output as a list of Blocks: each `print` (its header and value lines), and every
    other line on its own (free text: the --stats table, exit status, stderr)."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        b = _parse_print(lines, i)
        if b is None:
            b = Block(i + 1, [lines[i]])
        blocks.append(b)
        i += len(b.lines)
    return blocks


def _float(token):
    return float(token)  # Python reads nan, inf, -inf, -0 as printf writes them


def _where(block, dims_text, k):
    """Where element k of a print block is: its line in the actual output, label, index."""
    dims = [int(d) for d in dims_text.split(",")] if dims_text else []
    line = block.line_no + (1 + k // dims[-1] if dims else 0)
    return "line %d: %s element %s" % (line, block.head, _index(dims_text, k))


def _index(dims_text, k):
    dims = [int(d) for d in dims_text.split(",")] if dims_text else []
    idx = []
    for d in reversed(dims):
        idx.append(k % d)
        k //= d
    return "[%s]" % ",".join(str(x) for x in reversed(idx))


class Comparison:
    """The result of compare_outputs: `.ok`, `.problems` (one message per difference beyond
    tolerance or structural difference) and, over the float elements that differ within
    tolerance, the largest differences seen (for reports): `.max_rel` (|a-b| / max(|a|,|b|)),
    `.max_scaled` (|a-b| / M) and `.max_needed` (the smallest rtol that would pass:
    |a-b| / (max(|a|,|b|) + M)), per dtype, with where each was seen."""

    def __init__(self):
        self.problems = []
        self.differing = 0
        self.max_rel, self.max_scaled, self.max_needed = {}, {}, {}

    @property
    def ok(self):
        return not self.problems

    def note(self, table, dtype, value, where):
        if value > table.get(dtype, (0.0, ""))[0]:
            table[dtype] = (value, where)


def _compare_print(e, a, cmp, max_problems):
    """Compares two print blocks with the same header and skeleton, element by element."""
    dims_text = _HEADER.match(e.lines[0]).group("dims")
    if e.dtype not in FLOAT_DTYPES:
        for k, (x, y) in enumerate(zip(e.elements, a.elements)):
            if x != y and len(cmp.problems) < max_problems:
                cmp.problems.append("%s: expected %s, actual %s (%s values must be equal)"
                                    % (_where(a, dims_text, k), x, y, e.dtype))
        return
    rtol = FLOAT_RTOL[e.dtype]
    finite = [abs(_float(t)) for t in e.elements + a.elements if not math.isnan(_float(t)) and not math.isinf(_float(t))]
    big = max(finite, default=0.0)
    for k, (x, y) in enumerate(zip(e.elements, a.elements)):
        if x == y:
            continue
        fx, fy = _float(x), _float(y)
        where = _where(a, dims_text, k)
        if math.isnan(fx) or math.isnan(fy) or math.isinf(fx) or math.isinf(fy):
            if len(cmp.problems) < max_problems:
                cmp.problems.append("%s: expected %s, actual %s (nan and inf must be printed as expected)"
                                    % (where, x, y))
            continue
        diff, mag = abs(fx - fy), max(abs(fx), abs(fy))
        if diff == 0:  # -0 and 0
            continue
        tol = rtol * mag + rtol * big
        cmp.differing += 1
        cmp.note(cmp.max_rel, e.dtype, diff / mag, where)
        cmp.note(cmp.max_scaled, e.dtype, diff / big, where)
        cmp.note(cmp.max_needed, e.dtype, diff / (mag + big), where)
        if diff > tol and len(cmp.problems) < max_problems:
            cmp.problems.append(
                "%s: expected %s, actual %s: |difference| %.3g > tolerance %.3g (%s: rtol %.3g x (max(|a|,|b|) %.6g "
                "+ the array's largest |value| %.6g)); relative difference %.3g, %.3g of the array's largest"
                % (where, x, y, diff, tol, e.dtype, rtol, mag, big, diff / mag, diff / big))


def _clip(lines, n=8):
    return lines if len(lines) <= n else lines[:n] + ["... (%d more lines)" % (len(lines) - n)]


def compare_outputs(expected, actual, max_problems=20):
    """Compares a program's actual output with its expected output: every line must be the
    same, except the float elements of print blocks (same header and layout on both sides),
    which may differ within FLOAT_RTOL. Returns a Comparison."""
    cmp = Comparison()
    eb, ab = parse_output(expected), parse_output(actual)
    # Line up the two block sequences by their structure (free text and print headers and
    # skeletons, without the elements); whatever does not line up is a difference.
    key = lambda b: (b.dtype, b.head, tuple(b.skeleton)) if b.dtype else (None, b.lines[0])
    matcher = difflib.SequenceMatcher(None, [key(b) for b in eb], [key(b) for b in ab], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for e, a in zip(eb[i1:i2], ab[j1:j2]):
                if e.dtype:
                    _compare_print(e, a, cmp, max_problems)
            continue
        if len(cmp.problems) >= max_problems:
            continue
        old = _clip([l for b in eb[i1:i2] for l in b.lines])
        new = _clip([l for b in ab[j1:j2] for l in b.lines])
        at = ab[j1].line_no if j1 < len(ab) else (ab[-1].line_no + len(ab[-1].lines) if ab else 1)
        cmp.problems.append("line %d: the text differs (a line that is not a float value must be the same):\n%s"
                            % (at, "".join("  - %s\n" % l for l in old) + "".join("  + %s\n" % l for l in new)))
    return cmp


def describe_differences(cmp):
    """One line on the float values that differ within tolerance, or ''."""
    if not cmp.differing:
        return ""
    parts = []
    for dtype in sorted(cmp.max_needed):
        parts.append("%s: largest relative difference %.3g (%s), largest of the array's largest |value| %.3g (%s); "
                     "rtol needed %.3g of %.3g" % (dtype, cmp.max_rel[dtype][0], cmp.max_rel[dtype][1],
                                                   cmp.max_scaled[dtype][0], cmp.max_scaled[dtype][1],
                                                   cmp.max_needed[dtype][0], FLOAT_RTOL[dtype]))
    return "%d float values differ within tolerance; %s" % (cmp.differing, "; ".join(parts))


def check(shmapc, kind, path, update):
    actual, refusal = actual_run(shmapc, path) if kind == "run" else actual_error(shmapc, path)
    expected_path = os.path.splitext(path)[0] + ".expected"
    failure = harness_failure(actual)
    if update:
        if refusal or failure:
            print("%s: refusing to write %s: %s\n%s" % (path, expected_path, refusal or
                                                       "its output holds harness failure text: " + failure, actual))
            return False
        old = expected_text(path) if os.path.exists(expected_path) else None
        if old is not None and not harness_failure(old) and (
                old == actual or (kind == "run" and compare_outputs(old, actual).ok)):
            return True  # (kept: a float's last digits from this machine's kernels are no change)
        with open(expected_path, "w") as f:
            f.write(actual)
        print("%s: wrote %s" % (path, expected_path))
        return True
    if not os.path.exists(expected_path):
        print("%s: no expected output (%s); run with --update and review it" % (path, expected_path))
        return False
    with open(expected_path) as f:
        expected = f.read()
    bad = harness_failure(expected)
    if bad:
        print("%s: %s holds harness failure text, not an expectation: %r; fix the program or the test and "
              "regenerate it" % (path, expected_path, bad))
        return False
    if kind == "error":
        if actual == expected:
            return True
        print("%s: output differs from %s" % (path, expected_path))
        sys.stdout.writelines(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                                   "expected", "actual"))
        return False
    cmp = compare_outputs(expected, actual)
    if cmp.ok:
        note = describe_differences(cmp)
        if note:
            print("%s: %s" % (path, note))
        return True
    print("%s: output differs from %s beyond the tolerance (tests/golden.py FLOAT_RTOL):" % (path, expected_path))
    for p in cmp.problems:
        print("  " + p)
    print("Whole diff:")
    sys.stdout.writelines(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                               "expected", "actual"))
    return False


def check_cores(shmapc, path):
    """The program's output and the files it saves, pinned to one core and on every core this
    process may use, must be the same bytes."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        print("%s: this process may use only one core; nothing to compare" % path)
        return True
    with Compiled(shmapc, path) as c:
        if c.error:
            print("%s: %s" % (path, c.error))
            return False
        one = run_output(c.run(prefix=["taskset", "-c", str(cores[0])]))
        one_files = c.saved_files()
        every = run_output(c.run())
        every_files = c.saved_files()
    ok = True
    if one != every:
        ok = False
        print("%s: the output on one core (taskset -c %d) differs from the output on %d cores"
              % (path, cores[0], len(cores)))
        sys.stdout.writelines(difflib.unified_diff(one.splitlines(True), every.splitlines(True), "one core",
                                                   "%d cores" % len(cores)))
    for name in sorted(set(one_files) | set(every_files)):
        if one_files.get(name) != every_files.get(name):
            ok = False
            print("%s: the file %s saved on one core differs from the one saved on %d cores (%s)"
                  % (path, name, len(cores), "missing on one side" if None in (one_files.get(name), every_files.get(name))
                     else "same size" if len(one_files[name]) == len(every_files[name]) else "sizes differ"))
    return ok


def cpu_lacks(shmapc):
    """Why this CPU cannot run code compiled with SHMAPC_EXTRA_FLAGS (a --target-cpu it lacks
    features of), as the start-up check of a program compiled so says; None if it can."""
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "probe.smp")
        with open(src, "w") as f:
            f.write("def main() {\n  print(1.0);\n}\n")
        with Compiled(shmapc, src) as c:
            if c.error:  # (a failure, not a skip)
                sys.exit("the probe program for --skip-if-cpu-lacks: " + c.error)
            r = c.run(args=[])
        return r.stderr.strip() if r.returncode == 2 and "which this CPU lacks" in r.stderr else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("--update", action="store_true", help="rewrite the expected files")
    ap.add_argument("--cores", action="store_true",
                    help="compare each run program's output on one core with its output on every core, byte for byte")
    ap.add_argument("--skip-if-cpu-lacks", action="store_true",
                    help="exit 77 (CTest's skip) when this CPU cannot run code for SHMAPC_EXTRA_FLAGS's "
                         "--target-cpu, as a program's start-up check says")
    ap.add_argument("kind", choices=["run", "error", "all"])
    ap.add_argument("programs", nargs="*")
    a = ap.parse_args()
    os.chdir(ROOT)
    shmapc = os.path.abspath(a.shmapc) if os.sep in a.shmapc else a.shmapc
    if a.skip_if_cpu_lacks:
        lacks = cpu_lacks(shmapc)
        if lacks:
            print("skipped: %s" % lacks)
            return 77
    jobs = []
    if a.kind == "all":
        jobs = [("run", p) for p in run_programs()] + [("error", p) for p in error_programs()]
    else:
        progs = a.programs or (run_programs() if a.kind == "run" else error_programs())
        jobs = [(a.kind, os.path.relpath(os.path.abspath(p), ROOT) if os.path.isabs(p) else p)
                for p in progs]
    if a.cores:
        if a.update or a.kind != "run":
            ap.error("--cores compares run programs' outputs with each other; it takes `run` and no --update")
        failed = [p for _, p in jobs if not check_cores(shmapc, p)]
    else:
        failed = [p for kind, p in jobs if not check(shmapc, kind, p, a.update)]
    if a.update:
        print("checked %d expected files (an output within the float tolerance of its expected file leaves it as "
              "it is); review what was written with git diff" % (len(jobs) - len(failed)))
    if failed:
        print("%d of %d golden tests failed%s: %s" % (len(failed), len(jobs), " (expectations refused)" if a.update
                                                      else "", " ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
