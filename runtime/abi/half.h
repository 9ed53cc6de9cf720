// f16 (IEEE binary16) and bf16 (bfloat16: the upper half of an f32) as 16-bit patterns, and
// their conversions to and from f32 (docs/numerics.md, "f16 and bf16"). Header-only: the
// runtime's kernels use it, and the compiler uses it to round constants (the code it emits for
// element-wise loops does the same with integer operations, compiler/codegen/Elementwise.cpp).
//
// Every conversion to f16 / bf16 rounds to nearest, ties to even, and overflows to infinity;
// a NaN stays a NaN (quiet, sign kept: 0x7E00 / 0x7FC0 with the sign bit). f16 has subnormals
// (down to 2^-24), rounded exactly as numpy's float16. Only integer operations and exact
// float operations are used, so the results do not depend on the FPU's rounding or
// flush-to-zero modes. f64 -> f16 is correctly rounded directly (numpy's astype, used for
// literals); arrays convert f64 -> f32 -> half, as XLA does (docs/numerics.md).
#ifndef SHMAP_RUNTIME_HALF_H
#define SHMAP_RUNTIME_HALF_H
#include <cstdint>
#include <cstring>

namespace shm {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---- bf16: sign, 8 exponent bits, 7 mantissa bits (an f32 with the low 16 bits dropped)

inline float bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);  // NaN
  // Adding 0x7fff (+1 if the kept part is odd) carries into bit 16 exactly when the dropped
  // half is above one half (or equal with an odd kept part); a carry out of the mantissa
  // raises the exponent, up to infinity.
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// ---- f16: sign, 5 exponent bits (bias 15), 10 mantissa bits

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13));  // inf, NaN
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in f32
    const float v = (float)man * 0x1p-24f;
    return f32_from_bits(sign | f32_bits(v));
  }
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));  // rebias 15 -> 127
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 (incl. inf): rounds to inf
  if (a >= 0x38800000u) {                       // >= 2^-14: a normal f16
    uint32_t r = a - 0x38000000u;               // exponent bias 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);             // round the 13 dropped bits to nearest even
    return sign | (uint16_t)(r >> 13);
  }
  // Subnormal or zero: the value is m * 2^(e - 150) with m the 24-bit significand; in units
  // of 2^-24 that is m >> (126 - e), rounded to nearest even. Below 2^-25 it rounds to 0.
  const uint32_t e = a >> 23;
  if (e < 102) return sign;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;  // 14..24
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  q += (rem > half || (rem == half && (q & 1u))) ? 1u : 0u;  // may carry into the normal range
  return sign | (uint16_t)q;
}

// f64 -> f32 rounding to odd (truncate toward zero, then set the last bit if inexact): a
// second rounding of the result to a format at least 2 bits narrower is then the correctly
// rounded one (f64 -> f16 below).
inline float f64_to_f32_odd(double d) {
  float f = (float)d;
  if (d != d || (double)f == d) return f;
  uint32_t u = f32_bits(f);
  if ((f < 0 ? -(double)f : (double)f) > (d < 0 ? -d : d)) u -= 1;  // rounded away from zero
  return f32_from_bits(u | 1u);
}

// Correctly rounded f64 -> f16 (numpy's float64 -> float16).
inline uint16_t f64_to_f16(double d) { return f32_to_f16(f64_to_f32_odd(d)); }

}  // namespace shm
#endif
