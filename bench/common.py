"""What the benchmark scripts (bench/*/run.py) share: the one-core pin, the
single-threaded library environment, timing a program from the outside, the per-step time of
a shmapc program with a `steps` argument, bench/setup.sh's python, and the command line."""
import argparse
import os
import shutil
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# One thread = pinned to one core, where there is more than one and taskset exists.
PIN = ["taskset", "-c", "0"] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []
# BLAS and OpenMP libraries on one thread (each peer's own threads are set by its script).
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def parser(doc):
    """The command line every benchmark takes: --shmapc, --repeats, --quick (smaller sizes and
    fewer repeats, for bench/run_all.py's daily run; the script's parse() applies it) and
    --json (where to write the record of its rows, see Record)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shmapc", default=os.path.join(ROOT, "build", "compiler", "shmapc"))
    ap.add_argument("--repeats", type=int, default=None, help="default 3 (--quick: fewer)")
    ap.add_argument("--quick", action="store_true", help="reduced sizes and repeats (a quick check)")
    ap.add_argument("--json", metavar="PATH", help="write a JSON record of the rows and targets to PATH")
    ap.add_argument("--target-cpu", metavar="CPU",
                    help="generate shmapc's code for this CPU (shmapc compile --target-cpu: e.g. icelake-server "
                         "on an AMD machine for the code an Intel Xeon runs); default: this machine's")
    return ap


# shmapc compile's flags for every benchmark program (parse() sets them from --target-cpu).
COMPILE_FLAGS = []
# gcc's -march for the hand-written C peers: the CPU shmapc's code is for, so that a ratio
# under --target-cpu compares code for one CPU on both sides (icelake-server's C, like its
# shmapc code, prefers 256-bit vectors and calls libmvec's 8-lane tanhf, as on a Xeon).
C_MARCH = ["-march=native"]


def compile_flags():
    return list(COMPILE_FLAGS)


def c_march():
    """gcc's -march for the C peers: --target-cpu's CPU, else this machine's."""
    return list(C_MARCH)


def parse(ap, quick_repeats=1, **quick):
    """Parses the command line; under --quick, each option named in `quick` that was left at
    its default takes the value given there, and --repeats defaults to quick_repeats."""
    a = ap.parse_args()
    COMPILE_FLAGS[:] = ["--target-cpu", a.target_cpu] if a.target_cpu else []
    C_MARCH[:] = ["-march=" + (a.target_cpu or "native")]
    if a.target_cpu and subprocess.run(["gcc"] + C_MARCH + ["-E", "-x", "c", "/dev/null"],
                                       capture_output=True).returncode != 0:
        ap.error("gcc does not know -march=%s, so the C peers cannot be built for that CPU "
                 "(gcc --target-help lists the CPUs it knows)" % a.target_cpu)
    if a.repeats is None:
        a.repeats = quick_repeats if a.quick else 3
    if a.quick:
        for k, v in quick.items():
            if getattr(a, k) == ap.get_default(k):
                setattr(a, k, v)
    return a


def wall(cmd):
    """Seconds one run of cmd takes (its output discarded)."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def seconds_per_step(exe, pin, repeats, s1, s2):
    """A shmapc program's time per step of its `steps` argument: (the quickest run of s2 steps
    - the quickest of s1) / (s2 - s1), which leaves out start-up and compilation. `pin` comes
    before the program (taskset, mpirun ...)."""
    return per_step_interleaved([lambda k: pin + [exe, "--steps=%d" % k]], repeats, s1, s2)[0]


def best_line(cmd, repeats):
    """The run whose first printed number is smallest, as a list of floats."""
    runs = []
    for _ in range(repeats):
        out = subprocess.run(cmd, check=True, env=ENV, capture_output=True, text=True).stdout
        runs.append([float(v) for v in out.split()])
    return min(runs, key=lambda r: r[0])


def venv_python():
    """bench/setup.sh's python (JAX and PyTorch), else the JAX twins' (no PyTorch), else None."""
    for script in (os.path.join(ROOT, "bench", "setup.sh"), os.path.join(ROOT, "tests", "jax", "venv.sh")):
        try:
            return subprocess.run(["bash", script], check=True, capture_output=True, text=True).stdout.strip()
        except (subprocess.CalledProcessError, FileNotFoundError):
            continue
    return None


def per_step_interleaved(cmds_for, repeats, s1, s2, best=None):
    """The time per step of several programs with a step count, each `cmds_for[i](k)` the
    command running program i for k steps: (quickest run of s2 steps - quickest of s1) /
    (s2 - s1), with the programs' runs interleaved, so that load coming and going on a shared
    machine falls on all of them alike. `best` (a list, empty at first): the quickest runs so
    far, which a second call with the same list adds its repeats to."""
    if best is None:
        best = []
    if not best:
        best.extend([float("inf"), float("inf")] for _ in cmds_for)
    for _ in range(repeats):
        for j, k in enumerate((s1, s2)):
            for i, cmd_for in enumerate(cmds_for):
                best[i][j] = min(best[i][j], wall(cmd_for(k)))
    return [(b - a) / (s2 - s1) for a, b in best]



# ---- Machine-readable records (bench/run_all.py, bench/make_readme_table.py) ----------------
# Each script, given --json PATH, writes one record of what it printed: its rows (a figure,
# its unit, its ratios to peers) and its target rows (a ratio, the target's bound, whether it
# holds), with the CPU and the git revision it was measured on, so that the README's table is
# generated from measurements and says where each figure comes from.

def cpu_info():
    """The CPU this runs on: model name and vendor (/proc/cpuinfo, else lscpu) and core count."""
    model = vendor = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name" and model is None:
                    model = value
                elif key == "vendor_id" and vendor is None:
                    vendor = value
    except OSError:
        pass
    if model is None or vendor is None:
        try:
            out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
            fields = dict((k.strip(), v.strip()) for k, _, v in (l.partition(":") for l in out.splitlines()))
            model = model or fields.get("Model name")
            vendor = vendor or fields.get("Vendor ID")
        except (OSError, subprocess.CalledProcessError):
            pass
    return {"model": " ".join((model or "unknown").split()), "vendor": vendor or "unknown",
            "cores": os.cpu_count() or 1}


def git_revision():
    """The source tree's commit (short), with "-dirty" when it has uncommitted changes."""
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=10", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


TARGET_OPS = {"<=": lambda v, b: v <= b, "<": lambda v, b: v < b}


class Record:
    """The rows one benchmark run printed, for --json. row(): a figure (value None: its peer is
    not installed), `peers` its ratios {peer: this figure / the peer's}; target(): a figure
    (a ratio unless `unit` says otherwise) against one of the targets' bounds ("<=" or "<"),
    `waived` the reason where the project documents that this machine cannot reach it (it is
    reported, but bench/run_all.py does not fail on it)."""

    def __init__(self, benchmark, args, **params):
        self.benchmark, self.args = benchmark, args
        self.params = dict(params, repeats=args.repeats, quick=args.quick)
        if getattr(args, "target_cpu", None):
            self.params["target_cpu"] = args.target_cpu  # (code for another CPU than this one)
        self.rows, self.targets = [], []

    def row(self, name, value, unit, peers=None, note=None):
        # A row keeps its name whether or not its peer ran here, so that the README's columns
        # (one per CPU) line up; a missing peer is said in the note.
        name = name.split(" (not installed")[0]
        if value is None and note is None:
            note = "not installed (bench/setup.sh)"
        r = {"name": name, "value": value, "unit": unit}
        if peers:
            r["peers"] = peers
        if note:
            r["note"] = note
        self.rows.append(r)

    def target(self, name, value, op, bound, unit="x", waived=None, note=None):
        if unit == "x" and value is not None and value <= 0:
            # A ratio of two times is positive; one that is not comes from a time per step
            # (the difference of two runs) that load on the machine swamped.
            value, note = None, "unmeasurable: a time per step came out <= 0 under load (more steps or repeats)"
        t = {"name": name, "value": value, "unit": unit, "op": op, "bound": bound,
             "pass": None if value is None else bool(TARGET_OPS[op](value, bound))}
        if waived:
            t["waived"] = waived
        if note:
            t["note"] = note
        self.targets.append(t)

    def write(self):
        """Writes the record to --json's path, where one was given."""
        if not self.args.json:
            return
        import datetime
        import json
        rec = {"benchmark": self.benchmark, "cpu": cpu_info(), "revision": git_revision(),
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
               "params": self.params, "rows": self.rows, "targets": self.targets}
        with open(self.args.json, "w") as f:
            json.dump(rec, f, indent=1)
            f.write("\n")


def ratio_or_none(x, y):
    return x / y if x and y else None


def peer_output(cmd, repeats):
    """best_line(cmd)[0] for a peer (numpy, JAX, PyTorch), None where it cannot run (not
    installed): a missing peer makes its row say so, not the benchmark fail."""
    if cmd[0] is None:
        return None
    try:
        return best_line(cmd, repeats)[0]
    except (subprocess.CalledProcessError, FileNotFoundError, ValueError, IndexError):
        return None
