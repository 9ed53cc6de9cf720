#!/usr/bin/env python3
"""The compiler's behaviour on inputs that strain its resources, each case a CTest test:

  out-of-memory  a program of 350,000 statements compiled (`shmapc check`) with its address
                 space capped (ulimit -v 1600000, about 1.5 GiB: the compile thread's 1 GiB
                 stack reservation and the libraries leave too little heap for it, which needs
                 about 0.9 GB): shmapc must say "out of memory" and exit 2, not die of SIGABRT
                 from an exception on the compile thread. Not run in sanitizer builds (their
                 shadow memory does not fit such a cap).

  python3 check_resources.py --shmapc BUILD/compiler/shmapc out-of-memory
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile


def out_of_memory(shmapc, tmp):
    path = os.path.join(tmp, "many_statements.smp")
    with open(path, "w") as f:
        f.write("def main() {\n  let x = 1.0;\n")
        f.write("  x = x + 1.0;\n" * 350000)
        f.write('  print("x", x);\n}\n')
    cap = 1600000 * 1024

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    r = subprocess.run([shmapc, "check", path], capture_output=True, text=True, preexec_fn=limit,
                       timeout=120)
    problems = []
    if r.returncode != 2:
        problems.append(f"exit status {r.returncode}, expected 2")
    if "shmapc: out of memory" not in r.stderr:
        problems.append("no 'shmapc: out of memory' message")
    if "terminate called" in r.stderr:
        problems.append("an exception ended the process")
    return problems, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("case", choices=["out-of-memory"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        problems, r = {"out-of-memory": out_of_memory}[args.case](args.shmapc, tmp)
    if problems:
        print(f"FAIL {args.case}: " + "; ".join(problems))
        print("stderr (first 2000 characters):\n" + r.stderr[:2000])
        return 1
    print(f"ok {args.case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
