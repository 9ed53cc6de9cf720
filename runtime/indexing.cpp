// Kernels along one axis of an array viewed as [outer, n, inner] (outer: the product of the
// dimensions before the axis, inner: of those after it): gather by integer indices (numpy's
// take) and its transpose scatter-add, argmax / argmin, cumulative sums and argsort.
#include "half.h"
#include "util.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>
#include <type_traits>

namespace shm {

namespace {

void checkView(int64_t outer, int64_t n, int64_t inner, const char *what) {
  if (outer < 0 || n < 0 || inner < 0) fatalf("%s: negative dimension", what);
}

// numpy's rule: an index in [-n, n) (negative counts from the end); anything else is an error.
// a + b, wrapping for integers as numpy's int32 arithmetic does (no signed overflow);
// bool: or.
template <typename T>
T add(T a, T b) {
  if constexpr (std::is_same_v<T, uint8_t>) return a | b;
  else if constexpr (std::is_same_v<T, int32_t>) return (int32_t)((uint32_t)a + (uint32_t)b);
  else if constexpr (std::is_same_v<T, int64_t>) return (int64_t)((uint64_t)a + (uint64_t)b);
  else return a + b;
}

int64_t resolveIndex(int32_t i, int64_t n, const char *what) {
  int64_t k = i < 0 ? (int64_t)i + n : (int64_t)i;
  if (k < 0 || k >= n)
    fatalf("%s: index %d is out of range for an axis of size %lld", what, (int)i, (long long)n);
  return k;
}

template <typename T>
void scatterAdd(const T *v, const int32_t *idx, int64_t outer, int64_t n, int64_t inner, int64_t m, T *out) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j) {
      T *dst = out + (o * n + resolveIndex(idx[j], n, "scatter_add")) * inner;
      const T *src = v + (o * m + j) * inner;
      for (int64_t k = 0; k < inner; ++k) dst[k] = add(dst[k], src[k]);
    }
}

// f16 / bf16: every addition computed in f32 and rounded to the storage type, as XLA's
// scatter with an add combiner of that type (JAX's x.at[idx].add(v)).
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void scatterAddHalf(const uint16_t *v, const int32_t *idx, int64_t outer, int64_t n, int64_t inner,
                    int64_t m, uint16_t *out) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j) {
      uint16_t *dst = out + (o * n + resolveIndex(idx[j], n, "scatter_add")) * inner;
      const uint16_t *src = v + (o * m + j) * inner;
      for (int64_t k = 0; k < inner; ++k) dst[k] = Narrow(Widen(dst[k]) + Widen(src[k]));
    }
}

// f16 / bf16 arrays for the kernels below that compare or accumulate: widened to f32.
std::vector<float> widened(int32_t dtype, const void *x, int64_t count) {
  std::vector<float> w((size_t)count);
  widen_half(dtype, x, w.data(), count);
  return w;
}

// The first index of the extremum; a NaN is the extremum (numpy's argmax/argmin).
template <typename T>
void argExtremum(const T *x, int64_t outer, int64_t n, int64_t inner, bool isMin, int32_t *out) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      const T *p = x + o * n * inner + k;
      int64_t best = 0;
      for (int64_t i = 1; i < n; ++i) {
        T a = p[i * inner], b = p[best * inner];
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(b)) break;
          if (std::isnan(a)) {
            best = i;
            break;
          }
        }
        if (isMin ? a < b : a > b) best = i;
      }
      out[o * inner + k] = (int32_t)best;
    }
}

// Sequential running sums, as numpy's cumsum.
template <typename T>
void cumsum(const T *x, int64_t outer, int64_t n, int64_t inner, bool reverse, T *out) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      const int64_t base = o * n * inner + k;
      T acc = 0;
      for (int64_t s = 0; s < n; ++s) {
        const int64_t i = reverse ? n - 1 - s : s;
        acc = add(acc, x[base + i * inner]);
        out[base + i * inner] = acc;
      }
    }
}

// Stable argsort of each [.., n, ..] fiber, ascending, NaN last (numpy's kind="stable"); with
// `descending`, the order of the negated keys (ties keep their order, NaN still last).
template <typename T>
void argsort(const T *x, int64_t outer, int64_t n, int64_t inner, bool descending, int32_t *out) {
  std::vector<int32_t> order((size_t)n);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      const T *p = x + o * n * inner + k;
      for (int64_t i = 0; i < n; ++i) order[(size_t)i] = (int32_t)i;
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        T u = p[a * inner], v = p[b * inner];
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(u) || std::isnan(v)) return !std::isnan(u) && std::isnan(v);
        }
        return descending ? v < u : u < v;
      });
      for (int64_t i = 0; i < n; ++i) out[o * n * inner + i * inner + k] = order[(size_t)i];
    }
}

} // namespace

} // namespace shm

using namespace shm;

extern "C" void shm_argsort(int32_t dtype, int32_t descending, const void *x, int64_t outer,
                            int64_t n, int64_t inner, int32_t *out) {
  SHM_GUARD_BEGIN
  checkView(outer, n, inner, "argsort");
  if (n > INT32_MAX) fatalf("argsort: an axis of %lld elements has no i32 indices", (long long)n);
  switch (dtype) {
  case SHM_F32: argsort((const float *)x, outer, n, inner, descending != 0, out); break;
  case SHM_F64: argsort((const double *)x, outer, n, inner, descending != 0, out); break;
  case SHM_I32: argsort((const int32_t *)x, outer, n, inner, descending != 0, out); break;
  case SHM_BOOL: argsort((const uint8_t *)x, outer, n, inner, descending != 0, out); break;
  case SHM_I64: argsort((const int64_t *)x, outer, n, inner, descending != 0, out); break;
  case SHM_F16:
  case SHM_BF16:
    argsort(widened(dtype, x, outer * n * inner).data(), outer, n, inner, descending != 0, out);
    break;
  default: fatalf("argsort: unknown dtype code %d", (int)dtype);
  }
  SHM_GUARD_END("argsort")
}

extern "C" void shm_gather(int32_t dtype, const void *x, int64_t outer, int64_t n, int64_t inner,
                           const int32_t *idx, int64_t m, void *out) {
  SHM_GUARD_BEGIN
  checkView(outer, n, inner, "take");
  const int64_t es = dtype_size(dtype), row = inner * es;
  const char *src = static_cast<const char *>(x);
  char *dst = static_cast<char *>(out);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j)
      std::memcpy(dst + (o * m + j) * row, src + (o * n + resolveIndex(idx[j], n, "take")) * row, (size_t)row);
  SHM_GUARD_END("take")
}

extern "C" void shm_scatter_add(int32_t dtype, const void *x, int64_t outer, int64_t n, int64_t inner,
                                const int32_t *idx, int64_t m, const void *v, void *out) {
  SHM_GUARD_BEGIN
  checkView(outer, n, inner, "scatter_add");
  if (out != x) std::memcpy(out, x, (size_t)(outer * n * inner * dtype_size(dtype)));
  switch (dtype) {
  case SHM_F32: scatterAdd((const float *)v, idx, outer, n, inner, m, (float *)out); break;
  case SHM_F64: scatterAdd((const double *)v, idx, outer, n, inner, m, (double *)out); break;
  case SHM_I32: scatterAdd((const int32_t *)v, idx, outer, n, inner, m, (int32_t *)out); break;
  case SHM_BOOL: scatterAdd((const uint8_t *)v, idx, outer, n, inner, m, (uint8_t *)out); break;
  case SHM_I64: scatterAdd((const int64_t *)v, idx, outer, n, inner, m, (int64_t *)out); break;
  case SHM_F16:
    scatterAddHalf<f16_to_f32, f32_to_f16>((const uint16_t *)v, idx, outer, n, inner, m, (uint16_t *)out);
    break;
  case SHM_BF16:
    scatterAddHalf<bf16_to_f32, f32_to_bf16>((const uint16_t *)v, idx, outer, n, inner, m, (uint16_t *)out);
    break;
  default: fatalf("scatter_add: unknown dtype code %d", (int)dtype);
  }
  SHM_GUARD_END("scatter_add")
}

extern "C" void shm_argmax(int32_t dtype, int32_t is_min, const void *x, int64_t outer, int64_t n,
                           int64_t inner, int32_t *out) {
  SHM_GUARD_BEGIN
  checkView(outer, n, inner, "argmax");
  if (n == 0) fatalf("argmax: an empty axis has no extremum");
  switch (dtype) {
  case SHM_F32: argExtremum((const float *)x, outer, n, inner, is_min != 0, out); break;
  case SHM_F64: argExtremum((const double *)x, outer, n, inner, is_min != 0, out); break;
  case SHM_I32: argExtremum((const int32_t *)x, outer, n, inner, is_min != 0, out); break;
  case SHM_BOOL: argExtremum((const uint8_t *)x, outer, n, inner, is_min != 0, out); break;
  case SHM_I64: argExtremum((const int64_t *)x, outer, n, inner, is_min != 0, out); break;
  case SHM_F16:
  case SHM_BF16:
    argExtremum(widened(dtype, x, outer * n * inner).data(), outer, n, inner, is_min != 0, out);
    break;
  default: fatalf("argmax: unknown dtype code %d", (int)dtype);
  }
  SHM_GUARD_END("argmax")
}

// Each of the outer rows is two runs of whole [inner] slices: x's last `shift` slices first,
// then the others (no element moves within a slice, so any dtype is bytes).
extern "C" void shm_roll(int32_t dtype, const void *x, int64_t outer, int64_t n, int64_t inner, void *out,
                         int64_t shift) {
  SHM_GUARD_BEGIN
  checkView(outer, n, inner, "roll");
  if (n > 0 && (shift < 0 || shift >= n)) fatalf("roll: shift %lld outside [0, %lld)", (long long)shift, (long long)n);
  const int64_t slice = inner * dtype_size(dtype), row = n * slice;
  for (int64_t o = 0; o < outer && row > 0; ++o) {
    const char *from = (const char *)x + o * row;
    char *to = (char *)out + o * row;
    std::memcpy(to, from + (n - shift) * slice, (size_t)(shift * slice));
    std::memcpy(to + shift * slice, from, (size_t)((n - shift) * slice));
  }
  SHM_GUARD_END("roll")
}

extern "C" void shm_cumsum(int32_t dtype, int32_t reverse, const void *x, int64_t outer, int64_t n,
                           int64_t inner, void *out) {
  SHM_GUARD_BEGIN
  checkView(outer, n, inner, "cumsum");
  switch (dtype) {
  case SHM_F32: cumsum((const float *)x, outer, n, inner, reverse != 0, (float *)out); break;
  case SHM_F64: cumsum((const double *)x, outer, n, inner, reverse != 0, (double *)out); break;
  case SHM_I32: cumsum((const int32_t *)x, outer, n, inner, reverse != 0, (int32_t *)out); break;
  case SHM_BOOL: cumsum((const uint8_t *)x, outer, n, inner, reverse != 0, (uint8_t *)out); break;
  case SHM_I64: cumsum((const int64_t *)x, outer, n, inner, reverse != 0, (int64_t *)out); break;
  case SHM_F16:
  case SHM_BF16: {  // running sums in f32, each rounded once
    const int64_t count = outer * n * inner;
    std::vector<float> sums((size_t)count);
    cumsum(widened(dtype, x, count).data(), outer, n, inner, reverse != 0, sums.data());
    narrow_half(dtype, sums.data(), out, count);
    break;
  }
  default: fatalf("cumsum: unknown dtype code %d", (int)dtype);
  }
  SHM_GUARD_END("cumsum")
}
