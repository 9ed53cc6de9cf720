#!/usr/bin/python3
"""numpy reads what savez writes: compiles and runs a program that saves arrays of every dtype
and of ranks 0 to 3 with savez (keyword and positional names, a literal path and a str program
argument), then opens the archives with numpy.load and zipfile and checks names, dtypes,
shapes, values (recomputed here with numpy), the members' CRC-32s and that they are stored.
One archive holds MANY arrays, each its own (a table of thousands of pointers once took the
compiler seconds, quadratically; it is now filled in chunks, codegen/FuncEmitter.cpp ptrArray).

    /usr/bin/python3 tests/numpy/check_savez.py --shmapc build/compiler/shmapc
"""
import argparse
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

PROGRAM = """
arg out: str = "default.npz";

def main() {
  let w = reshape(iota(f32[24]), [2, 3, 4]) * 0.5 - 3.0;
  let b = iota(i32[5]) * 7 - 11;
  let m = iota(i32[4]) % 3 == 0;
  let d = cast(iota(f32[3]), f64) / 3.0;
  savez("ckpt.npz", w=w, b=b, m=m, d=d, s=2.5);
  savez(out, b, w[0], bias=b + 1);
  let x = iota(f32[2]);
  MANY_SAVEZ;
}
"""
# savez("many.npz", x + 0.0, ..., k1000=x + 1000.0, ...): positional and keyword members.
MANY = 3000
PROGRAM = PROGRAM.replace("MANY_SAVEZ", 'savez("many.npz", ' + ", ".join(
    ("x + %d.0" % k) if k < MANY // 3 else ("k%d=x + %d.0" % (k, k)) for k in range(MANY)) + ")")


def expected():
    w = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) * np.float32(0.5) - np.float32(3)).astype(np.float32)
    b = np.arange(5, dtype=np.int32) * 7 - 11
    return {
        "ckpt.npz": {"w": w, "b": b, "m": np.arange(4, dtype=np.int32) % 3 == 0,
                     "d": np.arange(3, dtype=np.float64) / 3.0, "s": np.float32(2.5)},
        "arg.npz": {"arr_0": b, "arr_1": w[0], "bias": b + 1},
        "many.npz": {("arr_%d" % k if k < MANY // 3 else "k%d" % k): np.arange(2, dtype=np.float32) + np.float32(k)
                     for k in range(MANY)},
    }


def check(tmp):
    problems = []
    for name, arrays in expected().items():
        path = os.path.join(tmp, name)
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()  # reads every member and checks its CRC-32
            if bad is not None:
                problems.append("%s: bad CRC-32 for %s" % (name, bad))
            for info in z.infolist():
                if info.compress_type != zipfile.ZIP_STORED:
                    problems.append("%s: %s is not stored" % (name, info.filename))
        with np.load(path) as f:
            if f.files != list(arrays):
                problems.append("%s: keys %s, expected %s" % (name, f.files, list(arrays)))
            for key, want in arrays.items():
                want = np.asarray(want)
                if key not in f.files:
                    continue
                got = f[key]
                if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
                    problems.append("%s[%s]: got %s %s %s, expected %s %s %s" % (
                        name, key, got.dtype, got.shape, got.tolist(), want.dtype, want.shape, want.tolist()))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "savez.smp"), os.path.join(tmp, "savez")
        with open(src, "w") as f:
            f.write(PROGRAM)
        c = subprocess.run([a.shmapc, "compile", src, "-o", exe], capture_output=True, text=True)
        if c.returncode != 0:
            print("FAIL: compile:\n" + c.stderr)
            return 1
        r = subprocess.run([exe, "--out=arg.npz"], cwd=tmp, capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL: run (status %d):\n%s" % (r.returncode, r.stderr))
            return 1
        leftovers = [n for n in os.listdir(tmp) if ".tmp-" in n]
        problems = check(tmp) + (["temporary files left: %s" % leftovers] if leftovers else [])
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print("ok: numpy.load reads what savez wrote")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
