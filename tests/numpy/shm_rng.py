#!/usr/bin/python3
"""A numpy re-implementation of the runtime's shm_random, bit-identical to runtime/rng.cpp.

The generator is specified in docs/numerics.md. Every floating-point step below is a single
IEEE-754 operation (+, -, *, /, sqrt, frexp) in the same order as in rng.cpp, so the results
match the C++ ones bit for bit (numpy never fuses multiply-adds).

    uniform(dtype, seed, n)  ->  random_uniform(T[n], seed=seed)
    normal(dtype, seed, n)   ->  random_normal(T[n], seed=seed)

Command line (used by the unit tests): shm_rng.py uniform|normal f32|f64|f16|bf16|i32|bool SEED N
prints one value per line, floats as float.hex().
"""
import sys

import numpy as np

from bf16 import round_bf16

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
NORMAL_KEY = 0x6A09E667F3BCC909
_U64 = np.uint64


def _splitmix64(x):
    z = x + GOLDEN
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


def bits(key, idx):
    """64 random bits of elements idx (a uint64 array) of the stream with this key."""
    with np.errstate(over="ignore"):
        k = np.array([key & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64)
        return _splitmix64(k * GOLDEN + idx)


def log_unit(u):
    """Natural log for u in (0, 1], as rng.cpp's log_unit."""
    m, e = np.frexp(u)
    small = m < 0.7071067811865476
    m = np.where(small, m * 2.0, m)
    e = np.where(small, e - 1, e)
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    c = [1.0, 0.3333333333333333, 0.2, 0.14285714285714285, 0.1111111111111111,
         0.09090909090909091, 0.07692307692307693, 0.06666666666666667,
         0.058823529411764705, 0.05263157894736842, 0.047619047619047616]
    t = np.full_like(s, c[10])
    for k in range(9, -1, -1):
        t = t * s2 + c[k]
    log_m = 2.0 * s * t
    return e.astype(np.float64) * 0.6931471805599453 + log_m


def cos_2pi(u):
    """cos(2*pi*u) for u in [0, 1), as rng.cpp's cos_2pi."""
    r = np.where(u > 0.5, 1.0 - u, u)
    neg = r > 0.25
    r = np.where(neg, 0.5 - r, r)
    sign = np.where(neg, -1.0, 1.0)
    cc = [1.0, -0.5, 0.041666666666666664, -0.001388888888888889, 2.48015873015873e-05,
          -2.755731922398589e-07, 2.08767569878681e-09, -1.1470745597729725e-11,
          4.779477332387385e-14, -1.5619206968586225e-16]
    sc = [1.0, -0.16666666666666666, 0.008333333333333333, -0.0001984126984126984,
          2.7557319223985893e-06, -2.505210838544172e-08, 1.6059043836821613e-10,
          -7.647163731819816e-13, 2.8114572543455206e-15, -8.22063524662433e-18]
    # sine branch (r > 1/8): cos(2 pi r) = sin(2 pi (1/4 - r))
    xs = 6.283185307179586 * (0.25 - r)
    xs2 = xs * xs
    ts = np.full_like(r, sc[9])
    for k in range(8, -1, -1):
        ts = ts * xs2 + sc[k]
    vs = xs * ts
    # cosine branch
    xc = 6.283185307179586 * r
    xc2 = xc * xc
    tc = np.full_like(r, cc[9])
    for k in range(8, -1, -1):
        tc = tc * xc2 + cc[k]
    return sign * np.where(r > 0.125, vs, tc)


def _dtype(dtype):
    return dtype if dtype == "bf16" else np.dtype(dtype)


def uniform(dtype, seed, n):
    dt = _dtype(dtype)
    b = bits(int(seed), np.arange(n, dtype=np.uint64))
    if dt == np.float32:
        return (b >> _U64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    if dt == np.float64:
        return (b >> _U64(11)).astype(np.float64) * 2.0 ** -53
    if dt == np.int32:
        return (b >> _U64(33)).astype(np.int32)
    if dt == np.bool_:
        return (b >> _U64(63)) == 0
    # f16 / bf16: k * 2^-p with p the significand's bits (11, 8): exact, in [0, 1); bf16 as
    # float32 values (tests/numpy/bf16.py)
    if dt == "bf16":
        return (b >> _U64(56)).astype(np.float32) * np.float32(2.0 ** -8)
    if dt == np.float16:
        return ((b >> _U64(53)).astype(np.float32) * np.float32(2.0 ** -11)).astype(np.float16)
    raise ValueError("uniform: unsupported dtype %s" % dt)


def normal(dtype, seed, n):
    dt = _dtype(dtype)
    if dt not in (np.float32, np.float64, np.float16, "bf16"):
        raise ValueError("normal: unsupported dtype %s" % dt)
    key = (int(seed) & 0xFFFFFFFFFFFFFFFF) ^ NORMAL_KEY
    i = np.arange(n, dtype=np.uint64)
    b1 = bits(key, _U64(2) * i)
    b2 = bits(key, _U64(2) * i + _U64(1))
    u1 = ((b1 >> _U64(11)) + _U64(1)).astype(np.float64) * 2.0 ** -53
    u2 = (b2 >> _U64(11)).astype(np.float64) * 2.0 ** -53
    z = np.sqrt(-2.0 * log_unit(u1)) * cos_2pi(u2)
    if dt == "bf16":  # f16 / bf16: rounded to f32 first, as cast(x, bf16) of an f64 array
        return round_bf16(z.astype(np.float32))
    if dt == np.float16:
        return z.astype(np.float32).astype(np.float16)
    return z.astype(dt)


def main(argv):
    if len(argv) != 5 or argv[1] not in ("uniform", "normal"):
        sys.stderr.write("usage: shm_rng.py uniform|normal f32|f64|f16|bf16|i32|bool SEED N\n")
        return 1
    dt = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": "bf16", "i32": np.int32,
          "bool": np.bool_}[argv[2]]
    vals = (uniform if argv[1] == "uniform" else normal)(dt, int(argv[3]), int(argv[4]))
    out = []
    for v in vals:
        if dt in (np.float32, np.float64, np.float16, "bf16"):
            out.append(float(v).hex())
        elif dt == np.bool_:
            out.append("true" if v else "false")
        else:
            out.append(str(int(v)))
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
