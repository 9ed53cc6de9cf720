// The random number generator of shm_random (private header; exact definition in
// docs/numerics.md, mirrored bit-for-bit by tests/numpy/shm_rng.py).
#ifndef SHMAP_RUNTIME_RNG_H
#define SHMAP_RUNTIME_RNG_H
#include <cstdint>

namespace shm::rng {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
// The normal stream's key is the seed xor this constant (first 64 bits of frac(sqrt(2))), so
// random_normal and random_uniform with the same seed are unrelated.
constexpr uint64_t kNormalKey = 0x6A09E667F3BCC909ull;

uint64_t splitmix64(uint64_t x);
// The 64 random bits of element i of the stream with the given key.
inline uint64_t bits(uint64_t key, uint64_t i) { return splitmix64(key * kGolden + i); }
// Natural log for u in (0, 1] and cos(2*pi*u) for u in [0, 1), built from + - * / only (no
// libm), so the result is the same on every IEEE-754 machine and in numpy.
double log_unit(double u);
double cos_2pi(double u);
// Element i of random_normal(f64, seed).
double normal(int64_t seed, uint64_t i);

} // namespace shm::rng

namespace shm {
// Elements first .. first + n of random_normal / random_uniform (kind) into out[0 .. n).
void random_range(int32_t dtype, int32_t kind, int64_t seed, void *out, int64_t n, int64_t first);
} // namespace shm
#endif
