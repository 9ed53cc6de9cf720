#!/usr/bin/env python3
"""Makes compiler/codegen/MathCoefficients.h and runtime/two_over_pi.h: the constants of the
element-wise math functions the compiler emits (compiler/codegen/Math*.cpp), computed here with
mpmath at 80 digits, so every coefficient can be re-derived.

Polynomials are near-minimax: interpolation of the target function at Chebyshev nodes of the
interval (in the variable the polynomial is evaluated in), in high precision, then each
coefficient rounded to the working precision; the printed error is measured on 4,000 points
of the interval for the rounded polynomial against the exact function, relative to the
quantity the algorithm needs (see each entry).

    python3 tools/math_coefficients.py            # writes both headers
    python3 tools/math_coefficients.py --check    # fails if they are not current"""
import argparse
import os
import struct
import sys

import mpmath as mp

mp.mp.dps = 80
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def f32(v):
    return struct.unpack("<f", struct.pack("<f", float(v)))[0] if abs(v) < 3.4e38 else float(v)


def to_double(v):
    return float(mp.mpf(v))


def rounded(v, single):
    # mpf -> nearest double -> (single) nearest float. Double rounding for single is harmless
    # here: coefficients need not be correctly rounded, only fixed.
    d = to_double(v)
    return f32(d) if single else d


def hexf(v):
    return float(v).hex()


def cheb_fit(g, a, b, degree, single, powers=None):
    """Monomial coefficients c[k] of p(z) = sum c[k] z^powers[k] interpolating g at Chebyshev
    nodes of [a, b] (len(powers) nodes)."""
    powers = list(range(degree + 1)) if powers is None else powers
    n = len(powers)
    a, b = mp.mpf(a), mp.mpf(b)
    nodes = [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (2 * i + 1) / (2 * n)) for i in range(n)]
    A = mp.matrix([[z ** p for p in powers] for z in nodes])
    y = mp.matrix([g(z) for z in nodes])
    c = mp.lu_solve(A, y)
    return [rounded(c[i], single) for i in range(n)]


def max_rel_error(g, coeffs, a, b, powers=None, scale=None, points=4000):
    powers = list(range(len(coeffs))) if powers is None else powers
    worst = mp.mpf(0)
    a, b = mp.mpf(a), mp.mpf(b)
    for i in range(points + 1):
        z = a + (b - a) * i / points
        p = sum(mp.mpf(c) * z ** k for c, k in zip(coeffs, powers))
        ref = g(z)
        s = scale(z) if scale else ref
        if s != 0:
            worst = max(worst, abs(p - ref) / abs(s))
    return float(worst)


def split_bits(v, bits):
    """v rounded toward zero to `bits` significant bits, as a double (exactly representable)."""
    v = mp.mpf(v)
    e = mp.floor(mp.log(abs(v), 2))
    q = mp.floor(abs(v) / mp.mpf(2) ** (e - bits + 1)) * mp.mpf(2) ** (e - bits + 1)
    return float(q if v > 0 else -q)


ENTRIES = []  # (name, values, single, comment)


def table(name, values, single, comment):
    ENTRIES.append((name, values, single, comment))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    check = ap.parse_args().check

    ln2, pi = mp.log(2), mp.pi
    pio2 = pi / 2

    # ---- exp: x = k ln2 + r, |r| <= ln2/2; exp(r) = 1 + r + r^2 P(r).
    half_ln2 = ln2 / 2 * mp.mpf("1.0001")
    def exp_p(r):
        if abs(r) < mp.mpf("1e-20"):  # (the interpolation's middle node is 0 up to rounding)
            return mp.mpf(0.5) + r / 6
        return (mp.exp(r) - 1 - r) / (r * r)
    for single, deg, tag in ((True, 5, "F32"), (False, 9, "F64")):
        c = cheb_fit(exp_p, -half_ln2, half_ln2, deg, single)
        err = max_rel_error(exp_p, c, -half_ln2, half_ln2,
                            scale=lambda r: mp.exp(r) / (r * r) if r != 0 else mp.mpf(1e30))
        table("kExpPoly" + tag, c, single, "P(r), exp(r) = 1 + r + r^2 P(r) on |r| <= ln2/2; "
              "error of r^2 P(r) relative to exp(r): %.3g" % err)
    # ln2 in two parts: k * hi exact for |k| < 2^8 (f32) / 2^11 (f64).
    for single, bits, tag in ((True, 16, "F32"), (False, 42, "F64")):
        hi = split_bits(ln2, bits)
        lo = rounded(ln2 - hi, single)
        table("kLn2Parts" + tag, [hi, lo], single, "ln2 = hi + lo, hi with %d significant bits" % bits)
    table("kLog2eF32", [f32(to_double(1 / ln2))], True, "1/ln2")
    table("kLog2eF64", [to_double(1 / ln2)], False, "1/ln2")

    # ---- log: m = 1 + f in [sqrt(1/2), sqrt(2)), s = f / (2 + f), z = s^2:
    # log(1 + f) = 2s + s R(z), R(z) = 2z/3 + 2z^2/5 + ... (R(0) = 0).
    zmax = ((mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)) ** 2 * mp.mpf("1.0001")
    def log_r(z):
        if z == 0:
            return mp.mpf(0)
        s = mp.sqrt(z)
        return (2 * mp.atanh(s) - 2 * s) / s
    for single, deg, tag in ((True, 4, "F32"), (False, 8, "F64")):
        powers = list(range(1, deg + 1))
        c = cheb_fit(log_r, 0, zmax, deg, single, powers=powers)
        err = max_rel_error(log_r, c, zmax / 1e6, zmax, powers=powers,
                            scale=lambda z: mp.log((1 + mp.sqrt(z)) / (1 - mp.sqrt(z))) / mp.sqrt(z))
        table("kLogPoly" + tag, c, single, "R(z) = c[0] z + c[1] z^2 + ..., z = s^2 <= %.5f; "
              "error of s R(z) relative to log(1+f): %.3g" % (float(zmax), err))

    # pow's log needs about 64 bits: R(z) = 2z/3 + z^2 T(z) with the first term exact in two
    # doubles and T fitted on its own.
    def log_t(z):
        if z < mp.mpf("1e-30"):
            return mp.mpf(2) / 5
        return (log_r(z) - 2 * z / 3) / (z * z)
    c = cheb_fit(log_t, 0, zmax, 9, False)
    err = max_rel_error(log_t, c, zmax / 1e6, zmax,
                        scale=lambda z: mp.log((1 + mp.sqrt(z)) / (1 - mp.sqrt(z))) / (mp.sqrt(z) * z * z))
    table("kLogTailF64", c, False, "T(z), R(z) = 2z/3 + z^2 T(z) (pow's log); error of s z^2 T(z) "
          "relative to log(1+f): %.3g" % err)
    two3 = mp.mpf(2) / 3
    table("kTwoThirds", [to_double(two3), to_double(two3 - mp.mpf(to_double(two3)))], False, "2/3 = hi + lo")

    # ---- tanh: |x| < T: x + x^3 Q(x^2); else 1 - 2 / (exp(2|x|) + 1).
    for single, deg, T, tag in ((True, 5, "0.625", "F32"), (False, 12, "0.625", "F64")):
        T = mp.mpf(T)
        def tanh_q(w):
            if w == 0:
                return mp.mpf(-1) / 3
            x = mp.sqrt(w)
            return (mp.tanh(x) - x) / (x * w)
        c = cheb_fit(tanh_q, 0, T * T, deg, single)
        err = max_rel_error(tanh_q, c, (T * T) / 1e6, T * T,
                            scale=lambda w: mp.tanh(mp.sqrt(w)) / (mp.sqrt(w) * w))
        table("kTanhPoly" + tag, c, single, "Q(w), tanh(x) = x + x^3 Q(x^2) for |x| < %s; "
              "error of x^3 Q relative to tanh(x): %.3g" % (mp.nstr(T, 4), err))

    # ---- sin, cos on |r| <= pi/4 (+ margin), z = r^2, computed in f64 for both dtypes:
    # sin(r) = r + r z S(z), cos(r) = 1 - z/2 + z^2 C(z).
    rmax2 = (pi / 4 * mp.mpf("1.001")) ** 2
    def sin_s(z):
        if z == 0:
            return mp.mpf(-1) / 6
        r = mp.sqrt(z)
        return (mp.sin(r) - r) / (r * z)
    def cos_c(z):
        if z == 0:
            return mp.mpf(1) / 24
        r = mp.sqrt(z)
        return (mp.cos(r) - 1 + z / 2) / (z * z)
    for deg_s, deg_c, tag in ((3, 3, "F32"), (6, 6, "F64")):
        c = cheb_fit(sin_s, 0, rmax2, deg_s, False)
        err = max_rel_error(sin_s, c, rmax2 / 1e6, rmax2,
                            scale=lambda z: mp.sin(mp.sqrt(z)) / (mp.sqrt(z) * z))
        table("kSinPoly" + tag, c, False, "S(z), sin(r) = r + r z S(z), |r| <= pi/4; error "
              "relative to sin(r): %.3g" % err)
        c = cheb_fit(cos_c, 0, rmax2, deg_c, False)
        err = max_rel_error(cos_c, c, rmax2 / 1e6, rmax2, scale=lambda z: mp.cos(mp.sqrt(z)) / (z * z))
        table("kCosPoly" + tag, c, False, "C(z), cos(r) = 1 - z/2 + z^2 C(z), |r| <= pi/4; "
              "error relative to cos(r): %.3g" % err)
    # pi/2 in four parts: 33 + 33 + 33 significant bits, then the rest rounded; j * part is
    # exact for |j| < 2^20.
    parts, rest = [], pio2
    for _ in range(3):
        p = split_bits(rest, 33)
        parts.append(p)
        rest -= mp.mpf(p)
    parts.append(to_double(rest))
    table("kPio2Parts", parts, False, "pi/2 = sum, the first three with 33 significant bits")
    table("kTwoOverPi", [to_double(2 / pi)], False, "2/pi")

    lines = ["// Generated by tools/math_coefficients.py: do not edit. The constants of the element-wise",
             "// math functions (compiler/codegen/Math*.cpp), with the measured error of each polynomial.",
             "#pragma once", "", "namespace shmapc::codegen::math {", ""]
    for name, values, single, comment in ENTRIES:
        lines.append("// " + comment)
        ty = "float" if single else "double"
        lines.append("inline constexpr %s %s[] = {%s};" % (
            ty, name, ", ".join(hexf(v) + ("f" if single else "") for v in values)))
        lines.append("")
    lines.append("} // namespace shmapc::codegen::math")
    coeff_text = "\n".join(lines) + "\n"

    # 2/pi to 1280 bits as 20 64-bit words, most significant first: word i holds bits
    # 64i+1 .. 64i+64 after the binary point.
    words = []
    mp.mp.dps = 450  # 1280 bits and a margin
    v = 2 / mp.pi
    for _ in range(20):
        v *= mp.mpf(2) ** 64
        w = int(mp.floor(v))
        words.append(w)
        v -= w
    lines = ["// Generated by tools/math_coefficients.py: do not edit. The bits of 2/pi after the binary",
             "// point, 64 to a word, most significant first, and pi/2 in two doubles (runtime/math_reduce.cpp).",
             "#pragma once", "#include <cstdint>", "",
             "inline constexpr uint64_t kTwoOverPiBits[] = {"]
    for i in range(0, len(words), 3):
        lines.append("    " + " ".join("0x%016xULL," % w for w in words[i:i + 3]))
    lines.append("};")
    pio2_hi = to_double(pio2)
    lines += ["", "// pi/2 = hi + lo (r = fraction times pi/2, in two doubles)",
              "inline constexpr double kPio2Hi = %s, kPio2Lo = %s;" % (hexf(pio2_hi), hexf(to_double(pio2 - mp.mpf(pio2_hi))))]
    pi_text = "\n".join(lines) + "\n"

    outputs = {os.path.join(ROOT, "compiler/codegen/MathCoefficients.h"): coeff_text,
               os.path.join(ROOT, "runtime/two_over_pi.h"): pi_text}
    stale = []
    for path, text in outputs.items():
        old = open(path).read() if os.path.exists(path) else None
        if old != text:
            if check:
                stale.append(path)
            else:
                with open(path, "w") as f:
                    f.write(text)
                print("wrote", os.path.relpath(path, ROOT))
    if stale:
        sys.exit("not current (run tools/math_coefficients.py): " + ", ".join(stale))


if __name__ == "__main__":
    main()
