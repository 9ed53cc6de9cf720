#!/usr/bin/python3
"""The expected outputs of the dtype programs (i64, f16, bf16), computed with numpy.

Each program tests/run/dtypes_*.smp has a twin below that recomputes, with numpy, every value
it prints, and renders it in shm_print's format (docs/numerics.md); the whole text must equal
the program's .expected file, which the golden test holds shmapc's output to. So the expected
outputs come from numpy, not from shmapc:

    /usr/bin/python3 tests/numpy/check_dtypes.py            # check every twin
    /usr/bin/python3 tests/numpy/check_dtypes.py --write    # (re)write the .expected files

numpy has float16 (IEEE binary16, whose arithmetic numpy does as JAX on CPU: in float32, each
result rounded to float16); bfloat16 is not in Debian's numpy, so it is modelled here as the
float32 values whose low 16 bits are zero, rounded from float32 to nearest even with integer
operations (tests/numpy/bf16.py, independent of shmapc's runtime/abi/half.h; when ml_dtypes is importable,
as in the JAX venv, the model is checked against ml_dtypes.bfloat16 on 2^20 random bit patterns
and every special case).

JAX's semantics the twins follow (checked against JAX 0.10.2 on CPU, see docs/numerics.md):
f16 / bf16 operations compute in float32 and round every result; conversions of arrays to
f16 / bf16 go through float32 (f64 -> f32 -> f16 double-rounds), a literal is converted from
its double directly; sums, matmul and cumsum accumulate in float32 and round once;
scatter_add rounds every addition.
"""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shm_rng  # noqa: E402  (the runtime's random generator, re-implemented)
from bf16 import round_bf16  # noqa: E402

F16, F32, F64, I32, I64 = np.float16, np.float32, np.float64, np.int32, np.int64


# ---- bfloat16 as rounded float32 values

def bf16(x):
    """float32 values rounded to bfloat16 (nearest, ties to even; NaN stays NaN), returned as
    float32 (every bfloat16 is exactly a float32)."""
    return round_bf16(x)


def f16(x):
    return np.asarray(x, dtype=F32).astype(F16)


def via_f32(x, to):
    """An array conversion to f16 / bf16 (via float32, as XLA)."""
    x32 = np.asarray(x).astype(F32)
    return bf16(x32) if to == "bf16" else x32.astype(F16)


def to_int(x, dtype):
    """Float -> integer as cast (and llvm.fptosi.sat): truncate, saturate, NaN -> 0."""
    x = np.asarray(x, dtype=F64)
    info = np.iinfo(dtype)
    t = np.trunc(np.nan_to_num(x, nan=0.0, posinf=np.inf, neginf=-np.inf))
    out = np.empty(x.shape, dtype)
    hi, lo = t >= float(info.max), t <= float(info.min)
    out[...] = np.where(hi | lo, 0, t).astype(dtype)
    out[hi] = info.max
    out[lo] = info.min
    return out


# ---- shm_print's format (docs/numerics.md)

def element(dtype, v):
    if dtype == "bool":
        return "true" if v else "false"
    if dtype in ("i32", "i64"):
        return "%d" % int(v)
    v = float(v)
    return "nan" if v != v else "%.6g" % v


def printed(label, dtype, a):
    a = np.asarray(a)
    head = ("%s: " % label if label else "") + "%s[%s]" % (dtype, ",".join(str(d) for d in a.shape))
    if a.ndim == 0:
        return head + " = " + element(dtype, a[()]) + "\n"
    if a.size == 0:
        return head + "\n" + "[" * a.ndim + "]" * a.ndim + "\n"
    rows = a.reshape(-1, a.shape[-1])
    lines = []
    idx = [0] * (a.ndim - 1)
    for r, row in enumerate(rows):
        opens = 1
        for d in range(a.ndim - 2, -1, -1):
            if idx[d] != 0:
                break
            opens += 1
        closes = 1
        for d in range(a.ndim - 2, -1, -1):
            if idx[d] != a.shape[d] - 1:
                break
            closes += 1
        text = " " * (a.ndim - opens) + "[" * opens + ", ".join(element(dtype, v) for v in row) + "]" * closes
        lines.append(text + ("," if r + 1 < len(rows) else ""))
        for d in range(a.ndim - 2, -1, -1):
            idx[d] += 1
            if idx[d] < a.shape[d]:
                break
            idx[d] = 0
    return head + "\n" + "\n".join(lines) + "\n"


class Out:
    """What a program prints, line by line."""

    def __init__(self):
        self.text = ""

    def __call__(self, label, dtype, a):
        self.text += printed(label, dtype, a)


# ---- the twins

def dtypes_convert(p):
    x = np.array([1.0, 0.1, 1.00048828125, 1.00146484375, 1.00390625, 1.01171875, 2049.0, 2051.0,
                  65504.0, 65519.996, 65520.0, -70000.0, 3.0e38, 3.4e38, 6.1035156e-05, 6.0e-08,
                  2.9802322e-08, 2.9802326e-08, 1.0e-6, -0.0], F32)
    p("f16", "f16", f16(x))
    p("bf16", "bf16", bf16(x))
    special = F32([np.nan, np.inf, -np.inf])
    p("f16 special", "f16", f16(special))
    p("bf16 special", "bf16", bf16(special))
    p("f16 -> f32", "f32", f16(x).astype(F32))
    p("bf16 -> f64", "f64", bf16(x).astype(F64))
    p("f16 -> bf16", "bf16", bf16(f16(x).astype(F32)))
    p("bf16 -> f16", "f16", f16(bf16(x)))
    d = (np.array([1.0, 1.0, 1.0], F32).astype(F64) + np.array([0.00048828125, 0.00390625, 0.5], F32).astype(F64)
         + np.array([9.094947017729282e-13, 9.313225746154785e-10, 0.0], F32).astype(F64))
    p("f64 -> f16", "f16", via_f32(d, "f16"))
    p("f64 -> bf16", "bf16", via_f32(d, "bf16"))
    p("literal 1.0004882812500009 as f16", "f16", F16(1.0004882812500009))   # numpy: direct
    # a literal to bf16: from its double through float32 (as ml_dtypes' conversion)
    p("literal 0.1 as bf16", "bf16", bf16(F32(0.1)))
    w = np.array([2.5, -2.5, 65504.0, 3.0e38, np.nan], F32)
    p("f16 -> i32", "i32", to_int(f16(w), I32))
    p("bf16 -> i64", "i64", to_int(bf16(w), I64))
    p("f16 -> i64", "i64", to_int(f16(F32([-70000.0, 1.0e10])), I64))
    big = np.array([70000, 2049, -2051, 16777217, 2147483647], I64)
    p("i64 -> f16", "f16", via_f32(big, "f16"))
    p("i64 -> bf16", "bf16", via_f32(big, "bf16"))
    p("i64 -> f32", "f32", big.astype(F32))
    p("i32 -> bf16", "bf16", via_f32(np.array([257, 259, -255, 0], I32), "bf16"))
    p("bool -> f16", "f16", f16(F32([1, 0])))
    p("bf16 -> bool", "bool", bf16(F32([0.0, -0.0, 1.0e-40, 2.0])) != 0)
    wide = np.arange(3, dtype=I64) * 1099511627776 + 3
    p("i64 -> i32", "i32", (-wide).astype(I32))
    p("i32 -> i64", "i64", np.array([-2147483648, 2147483647], I32).astype(I64))
    p("i64 -> f64", "f64", (wide * 8191).astype(F64))


def i64_pow(x, y):
    """i64 ** i64 as shmapc computes it: exact modulo 2^64 for y >= 0 (numpy's int64 power);
    for y < 0 (numpy raises) what the i32 rule (pow in f64, truncated, saturated) gives."""
    out = []
    for a, e in zip(np.asarray(x).tolist(), np.asarray(y).tolist()):
        if e >= 0:
            r = pow(a, e, 2**64)
            out.append(r - 2**64 if r >= 2**63 else r)
        else:
            out.append(1 if a == 1 else (-1 if e % 2 else 1) if a == -1 else 2**63 - 1 if a == 0 else 0)
    return np.array(out, I64)


def dtypes_arith(p):
    a = f16(F32([0.1, 1.5, -2.75, 1000.0, 65504.0, 3.0]))
    b = f16(F32([0.3, -0.5, 0.1, 3.0, 2.0, 7.0]))
    p("f16 a + b", "f16", a + b)
    p("f16 a - b", "f16", a - b)
    p("f16 a * b", "f16", a * b)
    p("f16 a / b", "f16", a / b)
    p("f16 a // b", "f16", a // b)
    p("f16 a % b", "f16", a % b)
    p("f16 a ** 2", "f16", a ** F16(2))
    p("f16 -a, abs", "f16", np.abs(-a))
    p("f16 maximum", "f16", np.maximum(a, b * F16(10.0)))
    p("f16 exp", "f16", np.exp(b))
    p("f16 log", "f16", np.log(np.abs(a)))
    p("f16 sqrt", "f16", np.sqrt(np.abs(a)))
    p("f16 tanh", "f16", np.tanh(b))
    p("f16 sin", "f16", np.sin(b))
    p("f16 floor", "f16", np.floor(a / F16(3.0)))
    c, d = bf16(a.astype(F32)), bf16(b.astype(F32))
    p("bf16 c + d", "bf16", bf16(c + d))
    p("bf16 c * d", "bf16", bf16(c * d))
    p("bf16 c / d", "bf16", bf16(c / d))
    p("bf16 c % d", "bf16", bf16(c % d))
    p("bf16 exp", "bf16", bf16(np.exp(d)))
    p("bf16 cos", "bf16", bf16(np.cos(d)))
    p("bf16 c * 0.1", "bf16", bf16(c * bf16(F32(0.1))))
    u = f16(F32([1.0009765625]))
    p("f16 u * u - (1 + 2^-9)", "f16", u * u - f16(F32([1.001953125])))
    v = bf16(F32([1.0078125]))
    p("bf16 v * v - (1 + 2^-6)", "bf16", bf16(bf16(v * v) - bf16(F32([1.015625]))))
    p("bf16 exp(log(3)) - 3", "bf16", bf16(bf16(np.exp(bf16(np.log(bf16(F32([3.0])))))) - F32(3.0)))
    nan = bf16(F32([np.nan, 1.0]))
    p("bf16 maximum with nan", "bf16", bf16(np.maximum(nan, bf16(F32([2.0, 2.0])))))
    p("f16 compare", "bool", a < b)
    p("bf16 == f16 (as f32)", "bool", c == a.astype(F32))
    big = np.array([3000, -3000, 7, -7, 9, -9, 5, 0], I64) * 1000000000
    div = np.array([7, 7, -2, -2, 0, 4, -4, 3], I64)
    p("i64 big", "i64", big)
    p("i64 big // div", "i64", big // div)
    p("i64 big % div", "i64", big % div)
    m = np.array([-2147483648], I64)[0] * I64(4294967296)
    p("INT64_MIN", "i64", m)
    p("INT64_MIN // -1, % -1", "i64", np.array([np.array([m]) // I64(-1), np.array([m]) % I64(-1)], I64).reshape(2))
    p("INT64_MIN - 1 (wraps)", "i64", (np.array([m]) - I64(1))[0])
    p("-INT64_MIN (wraps)", "i64", (-np.array([m]))[0])
    p("i64 (2^31 * 3)^2", "i64", i64_pow([2147483648 * 3], [2])[0])
    p("i64 3 ** 40 (wraps)", "i64", i64_pow([3], [40])[0])
    p("i64 pow", "i64", i64_pow([2, -2, 1, -1, 0, 5], [62, 63, -3, -3, -1, -2]))
    p("i64 maximum, minimum", "i64", np.concatenate([np.maximum(big, div), np.minimum(big, div)]))
    p("i64 compare", "bool", big > 6000000000)
    p("i64 sum", "i64", np.sum(big * 1000000))
    p("i64 max", "i64", np.max(big))
    i = np.arange(3, dtype=I32)
    j = np.arange(3, dtype=I64) + 4294967296
    p("i32 + i64", "i64", i + j)
    k = np.arange(3, dtype=I64) + 100
    p("i64 + f16", "f16", via_f32(k, "f16") + f16(F32([0.5, 1.5, 2.5])))
    p("i32 * bf16", "bf16", bf16(bf16(i.astype(F32)) * bf16(F32([0.5, 1.5, 2.5]))))
    tenths = F32([0.1, 0.2, 0.3])
    p("f16 + bf16", "f32", f16(tenths).astype(F32) + bf16(tenths))
    p("bf16 + f32", "f32", bf16(tenths) + tenths)
    p("f16 + f64", "f64", f16(tenths).astype(F64) + tenths.astype(F64))
    p("i64 * 1.5", "f64", k.astype(F64) * 1.5)
    p("i64 / i64", "f64", k.astype(F64) / 3.0)
    p("i64 mean", "f64", j.astype(F64).mean())
    p("f16 * 3 (int literal)", "f16", f16(tenths) * F16(3))
    p("where(i64, f16)", "f16", np.where(i > 0, via_f32(k, "f16"), F16(0.5)))
    p("i64 == i32", "bool", j - 4294967296 == i)


def dtypes_reduce(p):
    # sums in float32 (numpy's np.sum of a contiguous float32 array is the same pairwise tree,
    # docs/numerics.md), rounded once
    p("sum of 4096 bf16 ones", "bf16", bf16(np.ones(4096, F32).sum()))
    p("sum of 4096 f16 ones", "f16", f16(np.ones(4096, F32).sum()))
    hundredth = bf16(F32(0.01))
    p("sum of 4096 bf16 0.01", "bf16", bf16(np.full(4096, hundredth, F32).sum()))
    m = bf16(np.arange(12, dtype=F32).reshape(3, 4) * F32(0.1) + F32(1.0))
    p("bf16 m", "bf16", m)
    p("sum axis 1", "bf16", bf16(m.sum(1)))
    p("sum axis 0", "bf16", bf16(m.sum(0)))
    p("mean", "bf16", bf16(m.sum() / F32(12)))
    p("mean axis 1", "bf16", bf16(m.sum(1) / F32(4)))
    p("max axis 0", "bf16", m.max(0))
    p("min", "bf16", m.min())
    h = f16(F32([3.5, 0.0, -1.25, 2049.0, 1.0])) / f16(F32([1.0, 0.0, 1.0, 1.0, 1.0]))
    p("f16 h", "f16", h)
    p("max with nan", "f16", h.max())
    p("argmax with nan", "i32", np.argmax(h))
    p("argmin", "i32", np.argmin(f16(F32([3.5, 1.0, -1.25, 2049.0, -1.25]))))
    p("argmax bf16 ties", "i32", np.argmax(bf16(F32([1.0, 7.0, 7.0, 2.0]))))
    big = np.array([5, -3, 9, 9, -8], I64) * 1000000000000
    p("i64 argmax, argmin", "i32", np.array([np.argmax(big), np.argmin(big)]))
    p("i64 sum, max, min", "i64", np.array([big.sum(), big.max(), big.min()]))
    p("i64 cumsum", "i64", np.cumsum(big))
    c = bf16(np.cumsum(np.ones(1000, F32)))
    p("bf16 cumsum of 1000 ones at 255, 256, 257, 999", "bf16", c[[255, 256, 257, 999]])
    p("f16 cumsum", "f16", f16(np.cumsum(f16(F32([0.1, 0.2, 0.3, 2048.0])).astype(F32))))
    acc = np.zeros(2, F32)
    for _ in range(300):  # every addition rounded to bf16
        acc[0] = bf16(acc[0] + F32(1.0))
    p("bf16 scatter_add of 300 ones (each addition rounded)", "bf16", acc)
    sa = f16(F32([1.0, 2.0, 3.0]))
    np.add.at(sa, [2, 0, 2], f16(F32([0.1, 0.25, 0.5])))  # numpy: each addition in float16
    p("f16 scatter_add", "f16", sa)
    si = big.copy()
    np.add.at(si, [0, 0, 4], np.array([1, 2, 3], I64))
    p("i64 scatter_add", "i64", si)
    p("i64 take", "i64", big[[4, 0, -1]])
    p("f16 sort", "f16", np.sort(f16(F32([3.5, 0.0, -1.25, 2049.0, 1.0, -0.5]))))
    p("bf16 argsort", "i32", np.argsort(bf16(F32([0.3, -2.0, 0.1, 0.3, 5.0])), kind="stable"))
    p("i64 sort", "i64", np.sort(big))
    t = bf16(F32([0.5, 3.0, -1.0, 3.0]))
    order = np.argsort(-t, kind="stable")[:2]  # largest first, ties by lower index
    p("bf16 top_k values", "bf16", t[order])
    p("bf16 top_k indices", "i32", order)
    # matmul: every operand below is a short dyadic fraction, so the f32 products and sums are
    # exact in any order; the result is rounded once
    k = np.ones((1, 4096), F32)
    p("bf16 [1,4096] @ [4096,1] of ones", "bf16", bf16(k @ k.T))
    a = f16(np.arange(6, dtype=F32).reshape(2, 3) * F32(0.25) + F32(0.125))
    b = f16(np.arange(6, dtype=F32).reshape(3, 2) - F32(2.5))
    p("f16 a @ b", "f16", f16(a.astype(F32) @ b.astype(F32)))
    p("bf16 a @ b", "bf16", bf16(bf16(a.astype(F32)) @ bf16(b.astype(F32))))
    p("f16 matrix @ vector", "f16", f16(a.astype(F32) @ F32([1.0, -1.0, 0.5])))
    q = np.arange(6, dtype=I64).reshape(2, 3) * 3000000000
    p("i64 @", "i64", q @ np.arange(6, dtype=I64).reshape(3, 2))
    # not dyadic: 0.1^2 + 0.2^2 + 0.3^2 of the bf16 values, in f32 (JAX gives 0.140625)
    t = bf16(F32([0.1, 0.2, 0.3]))
    p("dot of 0.1, 0.2, 0.3 in bf16", "bf16", bf16((t[0] * t[0] + t[1] * t[1]) + t[2] * t[2]))


def fold_f32(blocks):
    """An all-reduce sum of f16 / bf16 blocks: widened to f32, added in member order (left to
    right), rounded once by the caller."""
    acc = blocks[0].astype(F32)
    for blk in blocks[1:]:
        acc = acc + blk.astype(F32)
    return acc


def dtypes_collectives(p):
    # mesh x=2, y=4; P(("x", "y")) gives device (x, y) element 4x + y, its group index over
    # ("x", "y")
    a = (np.arange(8, dtype=I64) - 3) * 1000000000
    h = f16(F32([2048.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5]))
    b = bf16(F32([256.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]))
    p("psum i64", "i64", a.sum(keepdims=True))
    p("psum f16 (2054.5 rounded)", "f16", f16(fold_f32([h[i:i + 1] for i in range(8)])))
    total = bf16(fold_f32([b[i:i + 1] for i in range(8)]))
    p("psum bf16 (263 rounded)", "bf16", total)
    p("pmean bf16", "bf16", bf16(total / F32(8)))
    p("pmax f16 over y", "f16", h.reshape(2, 4).max(1))
    p("pmin i64", "i64", a.min(keepdims=True))
    p("pmax bf16", "bf16", b.max(keepdims=True))
    # P("x", "y") of [2, 16]: device (x, y) holds row x, columns 4y .. 4y + 3
    ga = np.arange(32, dtype=I64).reshape(2, 16) * 1000000007
    gh = f16(np.arange(32, dtype=F32).reshape(2, 16) * F32(0.1))
    gb = bf16(np.arange(32, dtype=F32).reshape(2, 16) + F32(250.0))
    p("all_gather i64", "i64", np.tile(ga, (1, 4)))       # every device gathers its row
    a2a = np.zeros((8, 4), F16)
    for x in range(2):
        for y in range(4):  # device (x, y) receives element y of every member's block
            a2a[4 * x:4 * x + 4, y] = gh[x, [4 * j + y for j in range(4)]]
    p("all_to_all f16", "f16", a2a)
    pp = np.zeros((2, 16), F32)
    pp[:, 4:] = gb[:, :12]                               # y sends to y + 1; device 0 gets zeros
    p("ppermute bf16", "bf16", pp)
    p("psum_scatter bf16", "bf16", bf16(fold_f32([gb[:, 4 * y:4 * y + 4] for y in range(4)])))
    p("ppermute i64 over x", "i64", ga[::-1])


def dtypes_io(p):
    p("i64 scalar", "i64", I64(-4503599627370496) * I64(2048))
    p("f16 rank 3", "f16", f16(np.arange(12, dtype=F32).reshape(2, 3, 2) * F32(0.3) - F32(1.0)))
    p("bf16 scalar", "bf16", bf16(F32(3.14159)))
    p("iota i64", "i64", np.tile(np.arange(3, dtype=I64), (2, 1)) * 4000000000)
    p("iota f16 near 2048", "f16", np.arange(6, dtype=F16) + F16(2046.0))
    p("iota bf16", "bf16", bf16(bf16(np.arange(4, dtype=F32) * F32(100.0)) + F32(250.0)))
    p("zeros i64", "i64", np.zeros(2, I64))
    p("ones bf16", "bf16", np.ones(2, F32))
    p("full f16", "f16", np.full(3, F16(0.1)))
    p("full i64", "i64", np.full(1, 9007199254740991, I64))
    p("uniform f16", "f16", shm_rng.uniform(F16, 3, 5))
    p("uniform bf16", "bf16", shm_rng.uniform("bf16", 3, 5))
    p("normal f16", "f16", shm_rng.normal(F16, 4, 5))
    p("normal bf16", "bf16", shm_rng.normal("bf16", 4, 5))
    h = f16(F32([1.5, -0.1, 65504.0, 1.0e-7]))
    p("f16 round trip", "f16", h)
    p("i64 round trip", "i64", np.arange(3, dtype=I64) * -5000000000 + 7)
    p("f16 from .npz", "f16", h)
    p("i64 from .npz", "i64", np.arange(3, dtype=I64) * -5000000000 + 7)
    p("big-endian f16 from numpy", "f16", np.load(os.path.join(ROOT, "tests", "run", "data", "halves_f16_be.npy")))
    p("Fortran-order i64 from numpy", "i64", np.load(os.path.join(ROOT, "tests", "run", "data", "longs_2x3_fortran.npy")))
    p("f16 + bf16 is f32", "f32", h.astype(F32) + F32(0))
    p("arg big", "i64", I64(-9000000000000000000))   # given by the ARGS line
    p("arg half", "f16", f16(F32(0.1)))               # given: the double, to f32, to f16
    p("arg brain", "bf16", bf16(F32(0.3)))            # the default


TWINS = {"dtypes_convert": dtypes_convert, "dtypes_io": dtypes_io, "dtypes_arith": dtypes_arith, "dtypes_reduce": dtypes_reduce,
         "dtypes_collectives": dtypes_collectives}


def check_bf16_model():
    """The bf16 model against ml_dtypes, where it is installed (the JAX venv)."""
    try:
        import ml_dtypes
    except ImportError:
        return []
    rng = np.random.default_rng(0)
    bits = np.concatenate([rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32),
                           np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0x7FC00001,
                                     0xFFC00000, 0x00008000, 0x00018000, 0x3F808000, 0x3F818000,
                                     0x7F7F8000, 0x00000001], np.uint32)])
    x = bits.view(F32)
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.bfloat16).astype(F32)
    got = bf16(x)
    same = (want.view(np.uint32) == got.view(np.uint32)) | (np.isnan(want) & np.isnan(got))
    return [] if same.all() else ["bf16 model differs from ml_dtypes at %d values" % (~same).sum()]


def main():
    write = "--write" in sys.argv[1:]
    names = [a for a in sys.argv[1:] if not a.startswith("--")] or sorted(TWINS)
    failed = 0
    problems = check_bf16_model()
    for p in problems:
        print("FAIL", p)
    failed += bool(problems)
    for name in names:
        out = Out()
        with np.errstate(all="ignore"):  # overflow and NaN are part of the tests
            TWINS[name](out)
        path = os.path.join(ROOT, "tests", "run", name + ".expected")
        if write:
            with open(path, "w") as f:
                f.write(out.text)
            print("wrote", os.path.relpath(path, ROOT))
            continue
        have = open(path).read() if os.path.exists(path) else ""
        if have == out.text:
            print("ok   tests/run/%s" % name)
            continue
        failed += 1
        got, want = have.split("\n"), out.text.split("\n")
        for i in range(max(len(got), len(want))):
            g = got[i] if i < len(got) else "<missing>"
            w = want[i] if i < len(want) else "<missing>"
            if g != w:
                print("FAIL tests/run/%s line %d:\n  expected file %s\n  numpy         %s" % (name, i + 1, g, w))
                break
    print("%d twins, %d failed" % (len(names), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
