// Private to the runtime: what each reduction op (SHM_REDUCE_*) does to two elements, for the
// collectives' folds (fold.cpp) and the reduce kernel (kernels.cpp), so both agree: floats
// propagate NaN through max / min as JAX does; integer sums and products wrap (two's
// complement, as numpy's) instead of overflowing into undefined behaviour; bools (0 / 1) sum
// and max as or, min and prod as and.
#ifndef SHMAP_RUNTIME_COMBINE_H
#define SHMAP_RUNTIME_COMBINE_H
#include "shmap_runtime.h"

#include <cstdint>

namespace shm {

template <typename T, int Op> inline T combine(T a, T b);
// Floats: NaN propagates as in JAX's max/min.
#define SHM_FLOAT_COMBINE(T)                                                                   \
  template <> inline T combine<T, SHM_REDUCE_SUM>(T a, T b) { return a + b; }                \
  template <> inline T combine<T, SHM_REDUCE_PROD>(T a, T b) { return a * b; }               \
  template <> inline T combine<T, SHM_REDUCE_MAX>(T a, T b) { return (b > a || b != b) ? b : a; } \
  template <> inline T combine<T, SHM_REDUCE_MIN>(T a, T b) { return (b < a || b != b) ? b : a; }
SHM_FLOAT_COMBINE(float)
SHM_FLOAT_COMBINE(double)
#undef SHM_FLOAT_COMBINE
// i32 sums wrap (two's complement) instead of being undefined on overflow.
template <> inline int32_t combine<int32_t, SHM_REDUCE_SUM>(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a + (uint32_t)b);
}
template <> inline int64_t combine<int64_t, SHM_REDUCE_SUM>(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a + (uint64_t)b);
}
template <> inline int64_t combine<int64_t, SHM_REDUCE_MAX>(int64_t a, int64_t b) { return b > a ? b : a; }
template <> inline int64_t combine<int64_t, SHM_REDUCE_MIN>(int64_t a, int64_t b) { return b < a ? b : a; }
template <> inline int32_t combine<int32_t, SHM_REDUCE_MAX>(int32_t a, int32_t b) { return b > a ? b : a; }
template <> inline int32_t combine<int32_t, SHM_REDUCE_MIN>(int32_t a, int32_t b) { return b < a ? b : a; }
// Integer products wrap (two's complement), as numpy's.
template <> inline int32_t combine<int32_t, SHM_REDUCE_PROD>(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a * (uint32_t)b);
}
template <> inline int64_t combine<int64_t, SHM_REDUCE_PROD>(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a * (uint64_t)b);
}
// Bitwise, of integers and bools (0 / 1: logical).
#define SHM_BITWISE_COMBINE(T)                                                                 \
  template <> inline T combine<T, SHM_REDUCE_AND>(T a, T b) { return (T)(a & b); }           \
  template <> inline T combine<T, SHM_REDUCE_OR>(T a, T b) { return (T)(a | b); }            \
  template <> inline T combine<T, SHM_REDUCE_XOR>(T a, T b) { return (T)(a ^ b); }
SHM_BITWISE_COMBINE(int32_t)
SHM_BITWISE_COMBINE(int64_t)
SHM_BITWISE_COMBINE(uint8_t)
#undef SHM_BITWISE_COMBINE
template <> inline uint8_t combine<uint8_t, SHM_REDUCE_PROD>(uint8_t a, uint8_t b) { return a & b; }
// bool: sum and max are logical or, min is logical and.
template <> inline uint8_t combine<uint8_t, SHM_REDUCE_SUM>(uint8_t a, uint8_t b) { return a | b; }
template <> inline uint8_t combine<uint8_t, SHM_REDUCE_MAX>(uint8_t a, uint8_t b) { return a | b; }
template <> inline uint8_t combine<uint8_t, SHM_REDUCE_MIN>(uint8_t a, uint8_t b) { return a & b; }

} // namespace shm

#endif
