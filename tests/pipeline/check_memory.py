#!/usr/bin/env python3
"""A pipeline's stage programs hold what --emit=stages plans, allocated once per run:

- for each pipeline of the programs below, --emit=stages prints each device group's planned
  host memory (its stage program's arena: activations, residuals between a forward step and its
  backward, received messages, gradient sums; and, where its stages run shmaps, its blocks
  arena: the shmaps' results kept as the devices' blocks) and its allocations a run, and
  --stats=pipeline measures, on the group's thread, the most shm_alloc'd memory its stage
  program held and its allocations a run: the peak equals the plan, byte for byte, in the
  planned allocations (one per arena), whatever the number of micro-batches (no allocation per
  step); samples/pipeline_transformer.smp's stages are shmaps on a data x model submesh;
- 1F1B plans less than GPipe for the same model and micro-batches (it holds at most S-s
  micro-batches' activations on stage s, GPipe all M), and its plan shrinks as the micro-batches
  do (samples/pipeline_mlp.smp at M = 4, 8, 16).

    python3 tests/pipeline/check_memory.py --shmapc build/compiler/shmapc
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "mpi"))
from checks import FAILED, expect  # noqa: E402  (named checks, counted)


def sections(text, header, item, value):
    """name -> [value(match) for each `item` line] under each `header` line (its group 1)."""
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(header, line)
        if m:
            name = m.group(1)
            out[name] = []
        m = re.match(item, line)
        if m:
            out[name].append(value(m))
    return out


def planned(shmapc, path):
    """pipeline name -> [(planned bytes, allocations a run) per group]."""
    out = subprocess.run([shmapc, "compile", path, "--emit=stages", "-o", "-"], capture_output=True, text=True,
                         check=True).stdout
    return sections(out, r"pipeline (\w+): ",
                    r"  device group (\d+)'s stage program: (\d+) bytes of host memory planned, (\d+) allocations? a run",
                    lambda m: (int(m.group(2)), float(m.group(3))))


def measured(shmapc, path):
    """pipeline name -> [(peak bytes, allocations a run) per group]."""
    out = subprocess.run([shmapc, "run", path, "--", "--stats=pipeline"], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(path)).stdout
    return sections(out[out.index("== pipeline stats =="):], r"(\w+) \(",
                    r"  group \d+: .*host memory at most (\d+) bytes, ([\d.]+) allocations a run",
                    lambda m: (int(m.group(1)), float(m.group(2))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    shmapc = os.path.abspath(a.shmapc)
    mlp = open(os.path.join(ROOT, "samples", "pipeline_mlp.smp")).read()
    with tempfile.TemporaryDirectory() as tmp:
        programs = [os.path.join(ROOT, "tests", "run", "pipeline_placement.smp"),
                    os.path.join(ROOT, "tests", "run", "pipeline_losses.smp"),
                    os.path.join(ROOT, "samples", "pipeline_transformer.smp")]
        mlp_plans = {}
        for schedule in ("gpipe", "1f1b"):
            for m in (4, 8, 16):
                path = os.path.join(tmp, "mlp_%s_%d.smp" % (schedule, m))
                with open(path, "w") as f:
                    f.write(mlp.replace('microbatches=16, schedule="1f1b"',
                                        'microbatches=%d, schedule="%s"' % (m, schedule)))
                programs.append(path)
                mlp_plans[(schedule, m)] = path
        plans_of = {}
        for path in programs:
            plans, got = planned(shmapc, path), measured(shmapc, path)
            plans_of[path] = plans
            for name, plan in plans.items():
                where = "%s: %s" % (os.path.basename(path), name)
                expect("%s: each group's peak host memory is its plan, in its planned allocations a run" % where,
                       len(plan) > 1 and got.get(name) == plan,
                       "planned (bytes, allocations a run) %s, measured (peak, allocations a run) %s"
                       % (plan, got.get(name)))
            if path.endswith("pipeline_transformer.smp"):
                expect("pipeline_transformer: each group's stage shmaps' results planned in a blocks arena "
                       "(two allocations a run)", [n for _, n in plans.get("train_step", [])] == [2.0, 2.0],
                       str(plans))
        total = {k: sum(b for b, _ in plans_of[p]["train_step"]) for k, p in mlp_plans.items()}
        for m in (4, 8, 16):
            expect("pipeline_mlp, %d micro-batches: 1F1B plans less host memory than GPipe (%d < %d bytes)"
                   % (m, total[("1f1b", m)], total[("gpipe", m)]), total[("1f1b", m)] < total[("gpipe", m)])
        expect("pipeline_mlp under 1F1B: the plan shrinks as the micro-batches do (%s bytes at M = 4, 8, 16)"
               % [total[("1f1b", m)] for m in (4, 8, 16)],
               total[("1f1b", 4)] > total[("1f1b", 8)] > total[("1f1b", 16)])
    print("%d failed" % len(FAILED) if FAILED else "all passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
