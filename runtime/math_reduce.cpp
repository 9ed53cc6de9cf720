// shm_rem_pio2: the exact argument reduction of sin and cos for large arguments, the rare path
// of the compiler's own sin and cos (compiler/codegen/MathTrig.cpp). x = j pi/2 + r, |r| <= pi/4:
// x (2/pi) mod 4 is the product of x's 53-bit integer mantissa with the 192 bits of 2/pi that
// matter at x's exponent (bits above them only add multiples of 4, bits below them less than
// 2^-137), exact in integers (Payne and Hanek's method); its fraction, as two doubles, times
// pi/2 is r. The bits of 2/pi are runtime/two_over_pi.h, made by tools/math_coefficients.py.
//
// Deterministic: integer arithmetic, correctly rounded conversions, and products split
// exactly (Dekker) with no fused multiply-add, so the result is the same on every CPU.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "shmap_runtime.h"
#include "two_over_pi.h"

#include <cmath>
#include <cstring>

namespace {

using u128 = unsigned __int128;

uint64_t twoOverPiWord(size_t i) {
  return i < sizeof(kTwoOverPiBits) / sizeof(kTwoOverPiBits[0]) ? kTwoOverPiBits[i] : 0;
}

// hi + lo = a * b exactly (Dekker's product).
void twoProduct(double a, double b, double &hi, double &lo) {
  auto split = [](double v, double &h, double &l) {
    double scaled = v * 134217729.0;  // 2^27 + 1
    h = scaled - (scaled - v);
    l = v - h;
  };
  double ah, al, bh, bl;
  split(a, ah, al);
  split(b, bh, bl);
  hi = a * b;
  lo = (((ah * bh - hi) + ah * bl) + al * bh) + al * bl;
}

} // namespace

extern "C" int32_t shm_rem_pio2(double x, double *hi, double *lo) {
  if (!std::isfinite(x)) {  // sin and cos of inf and NaN are NaN
    *hi = x - x;
    *lo = 0;
    return 0;
  }
  if (std::fabs(x) <= 0.78539816339744828) {  // |x| <= pi/4 (rounded down): nothing to reduce
    *hi = x;
    *lo = 0;
    return 0;
  }
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const bool negative = bits >> 63;
  const int e = (int)((bits >> 52) & 0x7ff) - 1075;  // |x| = m 2^e (normal: |x| > pi/4)
  const uint64_t m = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
  // Skip the first p bits of 2/pi: with them, m 2^e (2/pi) gains only multiples of 4.
  const int p = e > 2 ? e - 2 : 0;
  uint64_t w[3];
  const size_t word = (size_t)p / 64;
  const int shift = p % 64;
  for (size_t k = 0; k < 3; ++k)
    w[k] = shift ? (twoOverPiWord(word + k) << shift) | (twoOverPiWord(word + k + 1) >> (64 - shift))
                 : twoOverPiWord(word + k);
  // prod = m * w, 256 bits, prod[0] the most significant word; x (2/pi) = prod 2^(e - p - 192).
  uint64_t prod[4];
  u128 t = (u128)m * w[2];
  prod[3] = (uint64_t)t;
  t = (u128)m * w[1] + (t >> 64);
  prod[2] = (uint64_t)t;
  t = (u128)m * w[0] + (t >> 64);
  prod[1] = (uint64_t)t;
  prod[0] = (uint64_t)(t >> 64);
  // The 64 bits of prod from bit `low` up (bit 0 the least significant).
  auto field = [&](int low) {
    const int wordIndex = 3 - low / 64, s = low % 64;
    uint64_t v = prod[wordIndex] >> s;
    if (s && wordIndex > 0) v |= prod[wordIndex - 1] << (64 - s);
    return v;
  };
  const int point = 192 + p - e;  // the binary point: prod's bits below it are the fraction
  uint32_t j = (uint32_t)(field(point) & 3);
  // The fraction's first 128 bits as a signed number: a fraction of 1/2 or more is read as
  // fraction - 1 (and the quadrant rounded up), so |r| <= pi/4.
  const u128 frac = ((u128)field(point - 64) << 64) | field(point - 128);
  const __int128 f = (__int128)frac;
  if (f < 0) j += 1;
  double fhi = (double)f;  // correctly rounded; below 2^127, so it converts back
  if (fhi >= 0x1p127) fhi = 0x1.fffffffffffffp126;
  const double flo = (double)(f - (__int128)fhi);
  const double scale = 0x1p-128;
  // r = (fhi + flo) 2^-128 pi/2, as two doubles.
  double ph, pl;
  twoProduct(fhi * scale, kPio2Hi, ph, pl);
  pl += fhi * scale * kPio2Lo + flo * scale * kPio2Hi;
  double rh = ph + pl;
  double rl = pl - (rh - ph);
  if (negative) {
    rh = -rh;
    rl = -rl;
    j = 0u - j;
  }
  *hi = rh;
  *lo = rl;
  return (int32_t)(j & 3);
}
