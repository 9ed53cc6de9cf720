#!/usr/bin/python3
"""The expected outputs of the dtype programs (issue 10: i64, f16, bf16), computed with numpy.

Each program tests/run/dtypes_*.smp has a twin below that recomputes, with numpy, every value
it prints, and renders it in shm_print's format (docs/numerics.md); the whole text must equal
the program's .expected file, which the golden test holds shmapc's output to. So the expected
outputs come from numpy, not from shmapc:

    /usr/bin/python3 tests/numpy/check_dtypes.py            # check every twin
    /usr/bin/python3 tests/numpy/check_dtypes.py --write    # (re)write the .expected files

numpy has float16 (IEEE binary16, whose arithmetic numpy does as JAX on CPU: in float32, each
result rounded to float16); bfloat16 is not in Debian's numpy, so it is modelled here as the
float32 values whose low 16 bits are zero, rounded from float32 to nearest even with integer
operations (bf16() below, independent of shmapc's runtime/half.h; when ml_dtypes is importable,
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

F16, F32, F64, I32, I64 = np.float16, np.float32, np.float64, np.int32, np.int64


# ---- bfloat16 as rounded float32 values

def bf16(x):
    """float32 values rounded to bfloat16 (nearest, ties to even; NaN stays NaN), returned as
    float32 (every bfloat16 is exactly a float32)."""
    x = np.asarray(x, dtype=F32)
    u = np.atleast_1d(x).view(np.uint32).astype(np.uint64)
    k = lambda v: np.uint64(v)  # noqa: E731  (no mixing with Python ints: numpy 1.24 would go to float)
    r = ((u + k(0x7FFF) + ((u >> k(16)) & k(1))) >> k(16)) << k(16)
    out = (r & k(0xFFFFFFFF)).astype(np.uint32).view(F32).reshape(x.shape)
    return np.where(np.isnan(x), F32(np.nan), out).astype(F32)


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


TWINS = {"dtypes_convert": dtypes_convert, "dtypes_arith": dtypes_arith}


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
