// Element-wise reduction of several sources in a fixed order (source 0 first), for the
// all-reduces, psum_scatter and reduce (collective_protocol.h: fold).
#include "collective_protocol.h"

#include <type_traits>

namespace shm {
namespace {

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

// dst[i] = src[0][i] op src[1][i] op ... (left to right), in tiles small enough that dst stays
// in L1 while the sources stream through.
template <typename T, int Op>
void fold_sources(int nsrc, const void *const *srcs, int64_t offset, void *dst_v, int64_t len) {
  T *dst = (T *)dst_v;
  constexpr int64_t kTile = 2048;
  for (int64_t t0 = 0; t0 < len; t0 += kTile) {
    const int64_t t1 = t0 + kTile < len ? t0 + kTile : len;
    const T *s0 = (const T *)srcs[0] + offset;
    for (int64_t i = t0; i < t1; ++i) dst[i] = s0[i];
    for (int j = 1; j < nsrc; ++j) {
      const T *s = (const T *)srcs[j] + offset;
      for (int64_t i = t0; i < t1; ++i) dst[i] = combine<T, Op>(dst[i], s[i]);
    }
  }
}

template <typename T>
void fold_op(int32_t op, int nsrc, const void *const *srcs, int64_t offset, void *dst, int64_t len) {
  switch (op) {
  case SHM_REDUCE_SUM: return fold_sources<T, SHM_REDUCE_SUM>(nsrc, srcs, offset, dst, len);
  case SHM_REDUCE_MAX: return fold_sources<T, SHM_REDUCE_MAX>(nsrc, srcs, offset, dst, len);
  case SHM_REDUCE_MIN: return fold_sources<T, SHM_REDUCE_MIN>(nsrc, srcs, offset, dst, len);
  case SHM_REDUCE_PROD: return fold_sources<T, SHM_REDUCE_PROD>(nsrc, srcs, offset, dst, len);
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
    case SHM_REDUCE_AND: return fold_sources<T, SHM_REDUCE_AND>(nsrc, srcs, offset, dst, len);
    case SHM_REDUCE_OR: return fold_sources<T, SHM_REDUCE_OR>(nsrc, srcs, offset, dst, len);
    case SHM_REDUCE_XOR: return fold_sources<T, SHM_REDUCE_XOR>(nsrc, srcs, offset, dst, len);
    }
  }
  fatalf("unknown reduction op %d for this dtype", (int)op);
}

// f16 / bf16: the sources widened to f32 tile by tile, folded in f32 in the same order, and
// each result rounded once to the storage type.
template <int Op>
void fold_half(int32_t dtype, int nsrc, const void *const *srcs, int64_t offset, void *dst, int64_t len) {
  constexpr int64_t kTile = 2048;
  float acc[kTile], x[kTile];
  for (int64_t t0 = 0; t0 < len; t0 += kTile) {
    const int64_t n = t0 + kTile < len ? kTile : len - t0;
    widen_half(dtype, (const uint16_t *)srcs[0] + offset + t0, acc, n);
    for (int j = 1; j < nsrc; ++j) {
      widen_half(dtype, (const uint16_t *)srcs[j] + offset + t0, x, n);
      for (int64_t i = 0; i < n; ++i) acc[i] = combine<float, Op>(acc[i], x[i]);
    }
    narrow_half(dtype, acc, (uint16_t *)dst + t0, n);
  }
}

} // namespace

void fold(int32_t dtype, int32_t op, int nsrc, const void *const *srcs, int64_t offset, void *dst,
          int64_t len) {
  switch (dtype) {
  case SHM_F32: return fold_op<float>(op, nsrc, srcs, offset, dst, len);
  case SHM_F64: return fold_op<double>(op, nsrc, srcs, offset, dst, len);
  case SHM_I32: return fold_op<int32_t>(op, nsrc, srcs, offset, dst, len);
  case SHM_BOOL: return fold_op<uint8_t>(op, nsrc, srcs, offset, dst, len);
  case SHM_I64: return fold_op<int64_t>(op, nsrc, srcs, offset, dst, len);
  case SHM_F16:
  case SHM_BF16:
    switch (op) {
    case SHM_REDUCE_SUM: return fold_half<SHM_REDUCE_SUM>(dtype, nsrc, srcs, offset, dst, len);
    case SHM_REDUCE_MAX: return fold_half<SHM_REDUCE_MAX>(dtype, nsrc, srcs, offset, dst, len);
    case SHM_REDUCE_MIN: return fold_half<SHM_REDUCE_MIN>(dtype, nsrc, srcs, offset, dst, len);
    case SHM_REDUCE_PROD: return fold_half<SHM_REDUCE_PROD>(dtype, nsrc, srcs, offset, dst, len);
    }
    fatalf("unknown reduction op %d", (int)op);
  }
  fatalf("unknown dtype code %d", (int)dtype);
}

} // namespace shm
