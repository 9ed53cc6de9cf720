#!/usr/bin/env python3
"""The same program compiled for different x86-64 targets prints and saves the same bits.

One program exercises every element-wise function (exp, log, sin, cos, tanh, pow, sqrt,
division, floor, conversions, f16 / bf16 rounding), reductions, cumsum, softmax and a gradient
of element-wise code over ranges that reach the rare paths (sin of 1e30, exp overflowing,
subnormal logs); it saves its results with savez and prints a few. It is compiled with
--target-cpu=x86-64 (SSE2), x86-64-v3 (AVX2), x86-64-v4 (where this CPU runs it, as its
start-up check says), icelake-server (an Intel CPU's tuning: 256-bit vectors, but 512 in
loops that call math) and native, at -O2 (and x86-64 and native at -O0); every build's .npz
and stdout must be byte for byte the same as the first build's. (Matrix products are left out: oneDNN and OpenBLAS choose
their kernels by CPU at run time, which docs/numerics.md states.)

    same_bits.py --shmapc BUILD/compiler/shmapc"""
import argparse
import os
import subprocess
import sys
import tempfile

PROGRAM = r'''
import nn;
def loss(w: f32[4096]) -> f32[] {
  return sum(tanh(w * 3.0) * sin(w) + exp(-w * w));
}
def main() {
  let i = iota(f32[4096]);
  let u = i / 4096.0;                                   # [0, 1)
  let wide = (u - 0.5) * 200.0;                         # [-100, 100]
  let huge = (u - 0.5) * 2e30;                          # sin/cos's exact reduction
  let tiny = u * 1e-40;                                 # subnormal inputs
  let d = cast(i, f64) / 4096.0;
  let h = cast(u * 8.0 - 4.0, f16);
  let bh = cast(u * 8.0 - 4.0, bf16);
  let e32 = exp(wide * 0.85);
  let l32 = log(u + tiny + 1e-40);
  let t32 = sin(wide) * cos(huge) + tanh(wide * 0.1);
  let p32 = (u + 0.25) ** (wide * 0.05) + sqrt(u) / (u + 0.5) + floor(wide * 0.3);
  let f32s = e32 + l32 + t32 + p32;
  let f64s = exp(d * 700.0) + log(d + 1e-300) + sin(d * 1e6) * cos(d * 1e20) + tanh(d * 8.0 - 4.0)
             + (d + 0.5) ** (d * 40.0 - 20.0);
  let halves = exp(h) + tanh(h) * sin(h);
  let bhalves = log(cast(bh, f32) + 5.0) + cast(cos(bh), f32);
  let soft = nn.softmax(wide * 0.01);
  let rows = nn.softmax(reshape(wide, [64, 64]) * 0.05);  # a row loop: fewer vectors in flight
  let g = grad(loss)(u - 0.5);
  savez("out.npz", e32=e32, l32=l32, t32=t32, p32=p32, f64s=f64s, halves=halves, bhalves=bhalves,
        soft=soft, rows=rows, sums=sum(f32s), means=mean(f64s), cum=cumsum(tanh(wide)), g=g);
  print("sum f32s", sum(f32s));
  print("sum f64s", sum(f64s));
  print("first", f32s[:8]);
  print("grad", g[:8]);
}
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    shmapc = os.path.abspath(ap.parse_args().shmapc)
    builds = [(cpu, "-O2") for cpu in ("native", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "icelake-server")]
    builds += [("x86-64", "-O0"), ("native", "-O0")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "prog.smp")
        with open(src, "w") as f:
            f.write(PROGRAM)
        for cpu, level in builds:
            d = os.path.join(tmp, cpu + level)
            os.mkdir(d)
            exe = os.path.join(d, "prog")
            r = subprocess.run([shmapc, "compile", src, "-o", exe, "--target-cpu=" + cpu, level],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit("FAIL: compiling for %s %s:\n%s" % (cpu, level, r.stderr))
            r = subprocess.run([exe], cwd=d, capture_output=True, text=True)
            # Which levels this CPU runs is the CPU's to say, through the program's start-up
            # check (not /proc/cpuinfo, which an emulator such as tools/test_other_cpu.sh's
            # passes through from the machine under it).
            if r.returncode == 2 and "which this CPU lacks" in r.stderr:
                print("(the %s %s build does not run on this CPU: %s)" % (cpu, level, r.stderr.strip()))
                continue
            if r.returncode != 0:
                sys.exit("FAIL: running the %s %s build:\n%s" % (cpu, level, r.stderr))
            with open(os.path.join(d, "out.npz"), "rb") as f:
                results.append(("%s %s" % (cpu, level), r.stdout, f.read()))
    name0, out0, npz0 = results[0]
    failures = 0
    for name, out, npz in results[1:]:
        same = out == out0 and npz == npz0
        failures += not same
        print("%s %s vs %s: %s" % ("ok  " if same else "FAIL", name, name0,
                                   "same bits" if same else "stdout differs" if out != out0 else ".npz differs"))
    print(out0, end="")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
