#!/usr/bin/env python3
"""--trace: each sample, run with --trace=FILE and --stats, writes a valid trace in the
Trace Event Format that Perfetto and chrome://tracing open, which agrees with the run:

- JSON with a traceEvents list; every event has name, ph, pid, tid; complete events ("X")
  have ts and dur >= 0, metadata events ("M") name the process and each thread;
- one track per device that ran (named "device N (axis=coordinate,...)"), and the host's, and
  one per device group of a pipeline ("pipeline group G") with its steps ("F s1 mb5"), its idle
  waits for messages between them ("idle (wait for a message)") and its idle time after its
  last step until the pipeline's end ("idle (the pipeline drains)");
- on each track, events in time order, and a span that starts inside another ends inside it
  (collectives and their waits inside the shmap body that ran them);
- each collective event names its axes and operand ("f32[2,5]"), which is the per-device block
  of a collective that --emit=comm lists under the same runtime name, and its source location
  ("loc": the path of the program or of a module it imports, as shmapc found it, a line of it
  and a column in that line);
- the bytes sent and received in the collective events add up, per collective, to the --stats
  table, and their number to its calls (counted once per collective: on device 0's track).

With --mpi the programs (meshes of 4 devices) run as 2 MPI ranks of 2 devices each, every rank
writing its own trace, and tools/merge-traces joins them first: a process per rank.

    python3 tests/trace/check_trace.py --shmapc build/compiler/shmapc [--mpi] [PROGRAMS]"""
import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import golden  # noqa: E402  (link_data)
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def stats_table(stdout):
    rows, on = {}, False
    for line in stdout.splitlines():
        if line.startswith("== shmap collective stats =="):
            on = True
            continue
        m = re.match(r"(\w+)\s+(\d+)\s+(\d+)\s+(\d+)$", line) if on else None
        if m:
            rows[m.group(1)] = tuple(int(g) for g in m.groups()[1:])
    return rows


def comm_operands(text):
    """(runtime collective, operand type) of each collective --emit=comm lists."""
    found = set()
    for m in re.finditer(r"^ +\w+\[.*\] (\w+\[[\d,]*\])(?:\{[^}]*\})? -> .*\n.*\(runtime (\w+),", text, re.M):
        found.add((m.group(2), m.group(1)))
    return found


def bad_location(loc, prog):
    """Why `loc` is not file:line:col of a place in `prog` or a module it imports ("" if it is)."""
    m = re.fullmatch(r"(.+\.smp):(\d+):(\d+)", loc or "")
    if not m or (m.group(1) != prog and not os.path.isfile(m.group(1))):
        return "not %s (or a module's path):LINE:COL" % prog
    lines = open(m.group(1)).read().split("\n")
    row, col = int(m.group(2)), int(m.group(3))
    return "" if 1 <= row <= len(lines) and 1 <= col <= len(lines[row - 1]) else "outside the file"


GROUP_TRACKS = 1 << 20  # (runtime/trace.h: kGroupTrackBase)
GROUP_DEVICE_TRACKS = 1 << 14  # (runtime/trace.h: kGroupDeviceTracks; the tid is the track id + 1)


def problems_of(trace, stats, comm=None, prog=None):
    out = []
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        return ["no traceEvents list"]
    names, tracks, flows = {}, collections.defaultdict(list), collections.defaultdict(list)
    for e in events:
        if not all(k in e for k in ("name", "ph", "pid", "tid")):
            return ["an event without name, ph, pid or tid: %r" % e]
        if e["ph"] == "M":
            if e["name"] == "thread_name":
                names[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e["ph"] == "X":
            if not isinstance(e.get("ts"), (int, float)) or not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0:
                return ["a complete event without ts or a dur >= 0: %r" % e]
            tracks[(e["pid"], e["tid"])].append(e)
        elif e["ph"] in ("s", "f"):  # a pipeline message's arrow, from its send to its receive
            if not isinstance(e.get("id"), int) or not isinstance(e.get("ts"), (int, float)):
                return ["a flow event without an id or ts: %r" % e]
            flows[e["id"]].append(e["ph"])
        else:
            return ["an event of phase %r (only X, M, s and f are written)" % e["ph"]]
    for flow, ends in flows.items():
        if sorted(ends) != ["f", "s"]:
            out.append("flow %d has the ends %s, not one start and one finish" % (flow, ends))
    for key in tracks:
        if key not in names:
            out.append("track %r has no name" % (key,))
        elif key[1] == 0 and names[key] != "host":
            out.append("track 0 is %r, not the host" % names[key])
        elif key[1] >= GROUP_TRACKS:  # a pipeline's stage program: its steps and waits for messages
            if names[key] != "pipeline group %d" % (key[1] - GROUP_TRACKS):
                out.append("track %r is named %r" % (key, names[key]))
            elif not any(re.fullmatch(r"[FBW] s\d+ mb\d+", e["name"]) for e in tracks[key]):
                out.append("track %r has no pipeline step span" % (key,))
            elif not any(e["name"] == "idle (the pipeline drains)" for e in tracks[key]):
                out.append("track %r has no idle span after its last step" % (key,))
            elif any(e["name"] == "idle (wait for a message)" and any(
                    s["ts"] < e["ts"] < s["ts"] + s["dur"] for s in tracks[key]
                    if re.fullmatch(r"[FBW] s\d+ mb\d+", s["name"])) for e in tracks[key]):
                out.append("track %r: an idle wait inside a step" % (key,))
        elif key[1] > GROUP_DEVICE_TRACKS:  # a device of a pipeline group's stage shmaps
            g, d = (key[1] - 1) // GROUP_DEVICE_TRACKS - 1, (key[1] - 1) % GROUP_DEVICE_TRACKS
            if not re.fullmatch(r"group %d device %d \(.*\)" % (g, d), names[key]):
                out.append("track %r is named %r" % (key, names[key]))
        elif key[1] > 0 and not re.fullmatch(r"device %d \(.*\)" % (key[1] - 1), names[key]):
            out.append("track %r is named %r" % (key, names[key]))
    for key, evs in tracks.items():
        ends = []  # the ends of the spans enclosing the current one (microseconds; 1 ns slack)
        for before, e in zip([None] + evs[:-1], evs):
            if before is not None and e["ts"] < before["ts"]:
                out.append("track %r: %r at %.3f before the previous event" % (key, e["name"], e["ts"]))
                break
            while ends and e["ts"] >= ends[-1] - 1e-3:
                ends.pop()
            if ends and e["ts"] + e["dur"] > ends[-1] + 1e-3:
                out.append("track %r: %r overlaps the end of the span it starts in" % (key, e["name"]))
                break
            ends.append(e["ts"] + e["dur"])
    totals = collections.defaultdict(lambda: [0, 0, 0])
    for key, evs in tracks.items():
        for e in evs:
            if e["name"] in ("send a message", "wait for a message", "idle (wait for a message)"):  # a pipeline's
                t = totals["point_to_point"]
                sent = e["name"] == "send a message"
                t[0] += sent
                t[1 if sent else 2] += e["args"]["bytes"]
                continue
            if e.get("cat") != "collective":
                continue
            if not re.fullmatch(r"(f32|f64|i32|i64|f16|bf16|bool)\[[\d,]*\]", e["args"].get("operand", "")) \
                    or "axes" not in e["args"]:
                out.append("collective %r without its axes and operand: %r" % (e["name"], e["args"]))
                return out
            why = bad_location(e["args"].get("loc"), prog) if prog else ""
            if why:
                out.append("collective %r's loc %r: %s" % (e["name"], e["args"].get("loc"), why))
                return out
            if comm is not None and (e["name"], e["args"]["operand"]) not in comm:
                out.append("collective %r of %s, which --emit=comm does not list (it has %s)" % (
                    e["name"], e["args"]["operand"], sorted(comm)))
                return out
            t = totals[e["name"]]
            # (device 0 counts each collective once, as --stats does; so does each pipeline
            # group's device 0 its group's)
            t[0] += key[1] == 1 or (key[1] < GROUP_TRACKS and (key[1] - 1) % GROUP_DEVICE_TRACKS == 0)
            t[1] += e["args"]["bytes_sent"]
            t[2] += e["args"]["bytes_received"]
    for kind in set(totals) | set(stats):
        if tuple(totals.get(kind, (0, 0, 0))) != stats.get(kind, (0, 0, 0)):
            out.append("%s: the trace has %s (calls, sent, received), --stats %s" % (
                kind, tuple(totals.get(kind, (0, 0, 0))), stats.get(kind, (0, 0, 0))))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("--mpi", action="store_true")
    ap.add_argument("programs", nargs="*")
    a = ap.parse_args()
    programs = a.programs or sorted(glob.glob(os.path.join(ROOT, "samples", "*.smp")))
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for prog in programs:
            name = os.path.relpath(prog, ROOT)
            exe, path = os.path.join(tmp, "prog"), os.path.join(tmp, "run.json")
            subprocess.run([a.shmapc, "compile", prog, "-o", exe] + (["--mpi"] if a.mpi else []), check=True, cwd=ROOT)
            comm = subprocess.run([a.shmapc, "compile", prog, "--emit=comm"], check=True, cwd=ROOT,
                                  capture_output=True, text=True).stdout
            # (in a folder of its own with the program's data files, as the golden tests run it:
            # never in the source tree, where a sample's checkpoint would be written over)
            rundir = os.path.join(tmp, "run_" + os.path.splitext(os.path.basename(prog))[0])
            os.mkdir(rundir)
            golden.link_data(prog, rundir)
            cmd = [exe, "--trace=" + path, "--stats"]
            if a.mpi:
                cmd = MPIRUN + ["-np", "2", exe, "--devices-per-rank=2", "--trace=" + path, "--stats"]
            run = subprocess.run(cmd, capture_output=True, text=True, cwd=rundir)
            if a.mpi and run.returncode == 0:
                subprocess.run([os.path.join(ROOT, "tools", "merge-traces"), path], check=True, capture_output=True)
            if run.returncode != 0:
                print("FAIL %s: exit %d: %s" % (name, run.returncode, run.stderr.strip()[-300:]))
                failed += 1
                continue
            try:
                trace = json.load(open(path))
                problems = problems_of(trace, stats_table(run.stdout), comm_operands(comm), prog)
            except (OSError, ValueError) as e:
                problems = ["not JSON: %s" % e]
            for p in problems[:5]:
                print("FAIL %s: %s" % (name, p))
            if not problems:
                devices = len({e["tid"] for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] > 0})
                print("ok   %s: %d events, %d device tracks" % (name, len(trace["traceEvents"]), devices))
            failed += bool(problems)
    print("%d of %d programs' traces disagree" % (failed, len(programs)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
