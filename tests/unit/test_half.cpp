// The f16 / bf16 conversions of runtime/abi/half.h, against references computed another
// way: the nearest value found by search among all 65536 f16 values (in double), and bf16 as
// the f32 neighbours that differ only in the low 16 bits. Ties to even, overflow to inf, NaN,
// signed zeros and f16's subnormals are checked explicitly.
#include <catch2/catch.hpp>

#include "half.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace shm;

namespace {

float bitsToFloat(uint32_t u) { return f32_from_bits(u); }

// Every finite non-negative f16 value in order of its bit pattern (which is its order).
const std::vector<double> &positiveF16() {
  static const std::vector<double> v = [] {
    std::vector<double> out;
    for (uint32_t h = 0; h < 0x7c00; ++h) {
      const uint32_t e = h >> 10, m = h & 0x3ff;
      out.push_back(e == 0 ? std::ldexp((double)m, -24) : std::ldexp(1.0 + m / 1024.0, (int)e - 15));
    }
    return out;
  }();
  return v;
}

// The correctly rounded f16 of a double (ties to even, overflow to inf), by search.
uint16_t referenceF16(double x) {
  if (std::isnan(x)) return 0x7e00;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  const std::vector<double> &v = positiveF16();
  // Beyond the largest finite value: inf once at or past the midpoint to the next binade's
  // first value (65536), which is where round-to-nearest overflows.
  if (a >= 65520.0) return sign | 0x7c00;
  const size_t hi = std::lower_bound(v.begin(), v.end(), a) - v.begin();  // v[hi] >= a
  if (hi == v.size()) return sign | 0x7bff;  // in (65504, 65520): the largest finite value
  if (v[hi] == a) return sign | (uint16_t)hi;
  const size_t lo = hi - 1;
  const double dl = a - v[lo], dh = v[hi] - a;
  size_t pick = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | (uint16_t)pick;
}

// bf16: the two bf16 neighbours of an f32 are its bits with the low 16 cleared, and that plus
// one unit; the nearer wins, ties to the even one.
uint16_t referenceBF16(float f) {
  if (std::isnan(f)) return std::signbit(f) ? 0xffc0 : 0x7fc0;
  uint32_t u = f32_bits(f);
  const uint32_t down = u & 0xffff0000u, up = down + 0x10000u;
  const double x = std::fabs((double)f), a = std::fabs((double)bitsToFloat(down));
  const double b = (up & 0x7fffffffu) >= 0x7f800000u ? std::ldexp(1.0, 128)  // past the largest: inf
                                                     : std::fabs((double)bitsToFloat(up));
  const double da = x - a, db = b - x;
  const uint32_t pick = da < db ? down : db < da ? up : ((down >> 16) & 1) == 0 ? down : up;
  return (uint16_t)(pick >> 16);
}

bool sameHalf(uint16_t a, uint16_t b, bool f16) {
  auto isNan = [&](uint16_t h) { return f16 ? (h & 0x7fff) > 0x7c00 : (h & 0x7fff) > 0x7f80; };
  return a == b || (isNan(a) && isNan(b));
}

} // namespace

TEST_CASE("f16 -> f32 is exact for every bit pattern, and f32 -> f16 gives it back", "[half]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32((uint16_t)h);
    const uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    INFO("f16 bits " << h);
    if (e == 0x1f) {
      CHECK((m == 0 ? std::isinf(f) : std::isnan(f)));
      CHECK(std::signbit(f) == ((h & 0x8000) != 0));
      if (m == 0) CHECK(f32_to_f16(f) == h);
      else CHECK(sameHalf(f32_to_f16(f), 0x7e00, true));
      continue;
    }
    const double want = (h & 0x8000 ? -1.0 : 1.0) *
                        (e == 0 ? std::ldexp((double)m, -24) : std::ldexp(1.0 + m / 1024.0, (int)e - 15));
    CHECK((double)f == want);
    CHECK(std::signbit(f) == ((h & 0x8000) != 0));  // -0 too
    CHECK(f32_to_f16(f) == h);
  }
}

TEST_CASE("f32 -> f16 rounds to nearest even, overflows to inf, has subnormals", "[half]") {
  CHECK(f32_to_f16(1.0f) == 0x3c00);
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  CHECK(f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);             // tie: to even (1.0)
  CHECK(f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);         // tie: to even (1 + 2^-9)
  CHECK(f32_to_f16(std::nextafter(1.0f + 0x1p-11f, 2.0f)) == 0x3c01);  // just above a tie
  CHECK(f32_to_f16(std::nextafter(1.0f + 0x1p-11f, 0.0f)) == 0x3c00);  // just below
  CHECK(f32_to_f16(65504.0f) == 0x7bff);                     // the largest f16
  CHECK(f32_to_f16(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);                     // the midpoint to 65536: inf
  CHECK(f32_to_f16(-1e30f) == 0xfc00);
  CHECK(f32_to_f16(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(sameHalf(f32_to_f16(std::nanf("")), 0x7e00, true));
  CHECK((f32_to_f16(-std::nanf("")) & 0x8000) != 0);         // NaN keeps its sign
  CHECK(sameHalf(f32_to_f16(bitsToFloat(0x7f800001u)), 0x7e00, true));  // a signalling NaN stays NaN
  CHECK(f32_to_f16(0x1p-14f) == 0x0400);                     // the smallest normal
  CHECK(f32_to_f16(0x1p-24f) == 0x0001);                     // the smallest subnormal
  CHECK(f32_to_f16(0x1p-25f) == 0x0000);                     // half of it: a tie, to even (0)
  CHECK(f32_to_f16(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);
  CHECK(f32_to_f16(3 * 0x1p-25f) == 0x0002);                 // 1.5 units: to even (2)
  CHECK(f32_to_f16(5 * 0x1p-25f) == 0x0002);                 // 2.5 units: to even (2)
  CHECK(f32_to_f16(1023 * 0x1p-24f) == 0x03ff);              // the largest subnormal
  CHECK(f32_to_f16(0x1p-14f - 0x1p-25f) == 0x0400);          // a tie, rounding up into the normals
  CHECK(f32_to_f16(-0x1p-24f) == 0x8001);
  CHECK(f32_to_f16(1e-45f) == 0x0000);                       // an f32 subnormal: 0
  CHECK(f32_to_f16(-1e-45f) == 0x8000);
}

TEST_CASE("f32 -> f16 agrees with the nearest f16 found by search", "[half]") {
  std::mt19937_64 rng(7);
  std::vector<uint32_t> bits;
  // Every f32 exponent f16 can reach (and a margin), with random mantissas, ties (the low 13
  // bits 0x1000, or for subnormal results the bit below the last kept one) and their neighbours.
  for (uint32_t e = 90; e <= 145; ++e)
    for (int k = 0; k < 4000; ++k) {
      const uint32_t m = (uint32_t)rng() & 0x7fffffu, s = (uint32_t)(rng() & 1) << 31;
      bits.push_back(s | e << 23 | m);
      const uint32_t tie = (m & ~0x1fffu) | 0x1000u;
      for (uint32_t t : {tie - 1, tie, tie + 1}) bits.push_back(s | e << 23 | (t & 0x7fffffu));
    }
  for (uint32_t u : bits) {
    const float f = bitsToFloat(u);
    INFO("f32 bits " << u << " = " << f);
    CHECK(f32_to_f16(f) == referenceF16((double)f));
  }
}

TEST_CASE("f64 -> f16 is correctly rounded (through f32 rounded to odd)", "[half]") {
  CHECK(f64_to_f16(1.0 + 0x1p-11 + 0x1p-40) == 0x3c01);  // (float) would round to the tie first
  CHECK(f64_to_f16(1.0 + 0x1p-11) == 0x3c00);
  CHECK(f64_to_f16(0x1p-25 + 0x1p-60) == 0x0001);
  CHECK(f64_to_f16(1e300) == 0x7c00);
  CHECK(f64_to_f16(-1e-300) == 0x8000);
  std::mt19937_64 rng(11);
  for (int k = 0; k < 200000; ++k) {
    // doubles near f16 values: an f16 value plus a small random offset
    const double base = std::ldexp(1.0 + (rng() % 1024) / 1024.0, (int)(rng() % 40) - 26);
    const double d = base * (1.0 + std::ldexp((double)(int64_t)(rng() % 4096) - 2048, -(int)(rng() % 50) - 11));
    INFO("double " << d);
    CHECK(f64_to_f16(d) == referenceF16(d));
  }
}

TEST_CASE("bf16 conversions round to nearest even, keep NaN and inf", "[half]") {
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(f32_to_bf16(bitsToFloat(0x3f808000u)) == 0x3f80);  // tie: to even
  CHECK(f32_to_bf16(bitsToFloat(0x3f818000u)) == 0x3f82);  // tie: to even (up)
  CHECK(f32_to_bf16(bitsToFloat(0x3f808001u)) == 0x3f81);
  CHECK(f32_to_bf16(bitsToFloat(0x3f807fffu)) == 0x3f80);
  CHECK(f32_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to inf
  CHECK(f32_to_bf16(bitsToFloat(0x7f7f7fffu)) == 0x7f7f);           // the largest bf16
  CHECK(f32_to_bf16(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(f32_to_bf16(bitsToFloat(0x7f800001u)) == 0x7fc0);           // a signalling NaN: NaN, not inf
  CHECK(f32_to_bf16(bitsToFloat(0xffffffffu)) == 0xffc0);
  CHECK(f32_to_bf16(-0.0f) == 0x8000);
  CHECK(f32_to_bf16(bitsToFloat(0x00008000u)) == 0x0000);           // an f32 subnormal tie: to 0
  CHECK(f32_to_bf16(bitsToFloat(0x00018000u)) == 0x0002);
  for (uint32_t h = 0; h < 0x10000; ++h) {                           // bf16 -> f32 -> bf16
    const float f = bf16_to_f32((uint16_t)h);
    CHECK(f32_bits(f) == h << 16);
    CHECK(sameHalf(f32_to_bf16(f), (uint16_t)h, false));
  }
  std::mt19937_64 rng(3);
  for (int k = 0; k < 300000; ++k) {
    uint32_t u = (uint32_t)rng();
    if (k % 3 == 1) u = (u & 0xffff0000u) | 0x8000u;  // ties
    const float f = bitsToFloat(u);
    INFO("f32 bits " << u);
    CHECK(sameHalf(f32_to_bf16(f), referenceBF16(f), false));
  }
}
