// shm_random: a counter-based generator (each element is a pure function of seed and index,
// so any subset of elements can be produced in any order, e.g. by different devices).
//
// Floating-point results must be bit-identical to tests/numpy/shm_rng.py, so this file is
// compiled without contracting a*b+c into fused multiply-adds (numpy never fuses).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "half.h"
#include "rng.h"
#include "shmap_runtime.h"
#include "util.h"

#include <cmath>

namespace shm::rng {

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + kGolden;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double log_unit(double u) {
  // u = m * 2^e with m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.172,
  // by its odd series to s^21 (truncation error < 1e-18 relative).
  int e = 0;
  double m = std::frexp(u, &e); // exact
  if (m < 0.7071067811865476) {
    m = m * 2.0; // exact
    e = e - 1;
  }
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  static const double c[11] = {1.0,
                               0.3333333333333333,
                               0.2,
                               0.14285714285714285,
                               0.1111111111111111,
                               0.09090909090909091,
                               0.07692307692307693,
                               0.06666666666666667,
                               0.058823529411764705,
                               0.05263157894736842,
                               0.047619047619047616}; // 1/(2k+1)
  double t = c[10];
  for (int k = 9; k >= 0; --k) t = t * s2 + c[k];
  const double log_m = 2.0 * s * t;
  return (double)e * 0.6931471805599453 + log_m;
}

double cos_2pi(double u) {
  // Reduce by symmetry on u itself (every subtraction below is exact), so no inexact range
  // reduction of a large angle is needed: r in [0, 1/8], |angle| <= pi/4.
  double r = u;
  if (r > 0.5) r = 1.0 - r;  // cos(2 pi u) = cos(2 pi (1 - u))
  double sign = 1.0;
  if (r > 0.25) {            // cos(2 pi r) = -cos(2 pi (1/2 - r))
    r = 0.5 - r;
    sign = -1.0;
  }
  static const double cc[10] = {1.0, -0.5, 0.041666666666666664, -0.001388888888888889,
                                2.48015873015873e-05, -2.755731922398589e-07,
                                2.08767569878681e-09, -1.1470745597729725e-11,
                                4.779477332387385e-14, -1.5619206968586225e-16}; // (-1)^k/(2k)!
  static const double sc[10] = {1.0, -0.16666666666666666, 0.008333333333333333,
                                -0.0001984126984126984, 2.7557319223985893e-06,
                                -2.505210838544172e-08, 1.6059043836821613e-10,
                                -7.647163731819816e-13, 2.8114572543455206e-15,
                                -8.22063524662433e-18}; // (-1)^k/(2k+1)!
  double v;
  if (r > 0.125) {           // cos(2 pi r) = sin(2 pi (1/4 - r))
    const double x = 6.283185307179586 * (0.25 - r);
    const double x2 = x * x;
    double t = sc[9];
    for (int k = 8; k >= 0; --k) t = t * x2 + sc[k];
    v = x * t;
  } else {
    const double x = 6.283185307179586 * r;
    const double x2 = x * x;
    double t = cc[9];
    for (int k = 8; k >= 0; --k) t = t * x2 + cc[k];
    v = t;
  }
  return sign * v;
}

double normal(int64_t seed, uint64_t i) {
  const uint64_t key = (uint64_t)seed ^ kNormalKey;
  const uint64_t b1 = bits(key, 2 * i), b2 = bits(key, 2 * i + 1);
  const double u1 = (double)((b1 >> 11) + 1) * 0x1p-53; // (0, 1]: log is finite
  const double u2 = (double)(b2 >> 11) * 0x1p-53;       // [0, 1)
  return std::sqrt(-2.0 * log_unit(u1)) * cos_2pi(u2);  // Box-Muller, cosine branch
}

} // namespace shm::rng

namespace shm {


// Elements first .. first + n of the stream into out[0 .. n).
void random_range(int32_t dtype, int32_t kind, int64_t seed, void *out, int64_t n, int64_t first) {
  if (n < 0) fatalf("random: negative element count");
  const uint64_t key = (uint64_t)seed;
  dtype_size(dtype); // rejects unknown dtype codes even when n == 0
  const bool isFloat = dtype == SHM_F32 || dtype == SHM_F64 || dtype == SHM_F16 || dtype == SHM_BF16;
  if (kind == SHM_RANDOM_NORMAL && !isFloat)
    fatalf("random_normal: dtype %s is not supported (float types only)", dtype_name(dtype));
  if (kind == SHM_RANDOM_UNIFORM) {
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t b = rng::bits(key, (uint64_t)(first + i));
      switch (dtype) {
      case SHM_F32: ((float *)out)[i] = (float)(b >> 40) * 0x1p-24f; break;
      case SHM_F64: ((double *)out)[i] = (double)(b >> 11) * 0x1p-53; break;
      case SHM_I32: ((int32_t *)out)[i] = (int32_t)(b >> 33); break; // floor(u * 2^31)
      case SHM_BOOL: ((uint8_t *)out)[i] = (b >> 63) == 0; break;     // u < 0.5
      // k * 2^-p with p the significand's bits: exact, in [0, 1)
      case SHM_F16: ((uint16_t *)out)[i] = f32_to_f16((float)(b >> 53) * 0x1p-11f); break;
      case SHM_BF16: ((uint16_t *)out)[i] = f32_to_bf16((float)(b >> 56) * 0x1p-8f); break;
      default: fatalf("random_uniform: unknown dtype code %d", (int)dtype);
      }
    }
  } else if (kind == SHM_RANDOM_NORMAL) {
    for (int64_t i = 0; i < n; ++i) {
      const double z = rng::normal(seed, (uint64_t)(first + i));
      switch (dtype) {
      case SHM_F32: ((float *)out)[i] = (float)z; break;
      case SHM_F64: ((double *)out)[i] = z; break;
      // rounded to f32, then to the half type (as cast(x, f16) of an f64 array)
      case SHM_F16: ((uint16_t *)out)[i] = f32_to_f16((float)z); break;
      case SHM_BF16: ((uint16_t *)out)[i] = f32_to_bf16((float)z); break;
      default: fatalf("random_normal: dtype %s is not supported (float types only)", dtype_name(dtype));
      }
    }
  } else {
    fatalf("random: unknown kind %d", (int)kind);
  }
}

} // namespace shm

extern "C" void shm_random(int32_t dtype, int32_t kind, int64_t seed, void *out, int64_t n) {
  SHM_GUARD_BEGIN
  shm::random_range(dtype, kind, seed, out, n, 0);
  SHM_GUARD_END("random")
}
