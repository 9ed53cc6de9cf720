// Array kernels without communication. Layout changes (broadcast, transpose, slices) are all
// one strided block copy (copy_strided in memory.cpp) with suitably chosen strides.
#include "combine.h"
#include "half.h"
#include "matmul_kernels.h"
#include "pool.h"
#include "shmap_runtime.h"
#include "trace.h"
#include "util.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <type_traits>
#include <vector>

using namespace shm;

namespace {

int64_t clamp_start(int64_t start, int64_t dim, int64_t size) {
  // JAX: start = clamp(start, 0, dim - size)
  const int64_t hi = dim - size;
  if (start > hi) start = hi;
  if (start < 0) start = 0;
  return start;
}

// ---- reduce ---------------------------------------------------------------------------------

// The identity each output element starts from (as JAX: 0, -inf / INT_MIN, +inf / INT_MAX).
template <typename T, int Op> T identity() {
  if constexpr (Op == SHM_REDUCE_SUM) return T(0);
  else if constexpr (std::is_same_v<T, uint8_t>) return Op == SHM_REDUCE_MAX ? 0 : 1;
  else if constexpr (std::numeric_limits<T>::has_infinity)
    return Op == SHM_REDUCE_MAX ? -std::numeric_limits<T>::infinity()
                                : std::numeric_limits<T>::infinity();
  else return Op == SHM_REDUCE_MAX ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

// The max (min) of a contiguous float row in 16 lanes, which vectorize: true with it in m
// where that is the value the fold in row order gives, i.e. when the row holds no NaN (the
// fold keeps the last NaN) and the extremum is not zero (the fold keeps the first of -0 and
// +0, which lanes do not know); else false, and the caller folds the row in order.
template <typename T, int Op> bool row_extremum(const T *in, int64_t len, T &m) {
  constexpr int kLanes = 16;
  if constexpr (!std::is_floating_point_v<T> || (Op != SHM_REDUCE_MAX && Op != SHM_REDUCE_MIN)) {
    return false;
  } else {
    if (len < 2 * kLanes) return false;
    T lane[kLanes];
    bool nan = false;
    for (int j = 0; j < kLanes; ++j) lane[j] = in[j];
    int64_t i = kLanes;
    for (; i + kLanes <= len; i += kLanes)
      for (int j = 0; j < kLanes; ++j) {
        const T x = in[i + j];
        nan |= x != x;
        lane[j] = Op == SHM_REDUCE_MAX ? (x > lane[j] ? x : lane[j]) : (x < lane[j] ? x : lane[j]);
      }
    for (int j = 0; j < kLanes; ++j) nan |= lane[j] != lane[j];
    m = lane[0];
    for (int j = 1; j < kLanes; ++j) m = Op == SHM_REDUCE_MAX ? (lane[j] > m ? lane[j] : m) : (lane[j] < m ? lane[j] : m);
    for (; i < len; ++i) {
      nan |= in[i] != in[i];
      m = Op == SHM_REDUCE_MAX ? (in[i] > m ? in[i] : m) : (in[i] < m ? in[i] : m);
    }
    return !nan && m != T(0);
  }
}

// Walks the input once in row-major order, folding each element into its output element
// (output stride 0 along reduced dimensions). Every output element therefore accumulates its
// inputs in row-major order of the reduced indices: a fixed, documented order, independent of
// the shape of the loop nest, and cache friendly for any set of axes.
template <typename T, int Op>
void reduce_t(const T *in, int32_t rank, const int64_t *shape, const bool *reduced, T *out,
              int64_t out_n) {
  for (int64_t i = 0; i < out_n; ++i) out[i] = identity<T, Op>();
  int64_t ostr[kMaxRank];
  int64_t s = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    ostr[d] = reduced[d] ? 0 : s;
    if (!reduced[d]) s *= shape[d];
  }
  if (rank == 0) {
    out[0] = combine<T, Op>(out[0], in[0]);
    return;
  }
  for (int32_t d = 0; d < rank; ++d)
    if (shape[d] == 0) return;
  const int32_t last = rank - 1;
  const int64_t len = shape[last];
  int64_t idx[kMaxRank] = {0};
  int64_t oo = 0;
  for (;;) {
    if (ostr[last] == 0) {
      T acc = out[oo];
      T m;
      if (row_extremum<T, Op>(in, len, m)) acc = combine<T, Op>(acc, m);
      else
        for (int64_t i = 0; i < len; ++i) acc = combine<T, Op>(acc, in[i]);
      out[oo] = acc;
    } else {
      for (int64_t i = 0; i < len; ++i) out[oo + i] = combine<T, Op>(out[oo + i], in[i]);
    }
    in += len;
    int32_t d = last - 1;
    for (; d >= 0; --d) {
      oo += ostr[d];
      if (++idx[d] < shape[d]) break;
      oo -= ostr[d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// ---- float sums: pairwise summation --------------------------------------------------------
//
// Each output element is the pairwise sum of its inputs taken in row-major order of the
// reduced indices, as numpy's pairwise_sum (numpy/core/src/umath/loops_utils.h.src) sums a
// contiguous run: for n inputs,
//   n < 8:     left to right;
//   n <= 128:  8 accumulators, r[k] = x[k] + x[k+8] + x[k+16] + ... (left to right), then
//              ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the n % 8 last
//              elements added left to right;
//   n > 128:   m = n/2 rounded down to a multiple of 8; sum(x[:m]) + sum(x[m:]).
// and the output is 0 + that sum. The tree depends only on the number of inputs, never on the
// memory layout, the axes or a thread count, so results are deterministic (numpy itself sums
// non-contiguous axes sequentially). Error bound: docs/numerics.md.
//
// The work is arranged for the layout: where the input's last dimension is reduced, each
// output sums its own inputs; where it is kept, a tile of up to kTile neighbouring outputs is
// summed side by side, every step of the tree applied to a whole row of the tile, so rows are
// read contiguously. Both do the same additions in the same order for every output.

constexpr int64_t kLeaf = 128;  // numpy's PW_BLOCKSIZE
constexpr int64_t kTile = 256;  // outputs summed side by side
constexpr int kMaxDepth = 64;   // > log2 of any element count

// The reduced dimensions (adjacent ones merged) as seen from one output element.
struct ReducedDims {
  int32_t rank = 0;
  int64_t shape[kMaxRank], stride[kMaxRank];  // stride in elements of the input
  int64_t count = 1;

  int64_t offset(int64_t r) const {  // input offset of the r-th reduced element
    int64_t off = 0;
    for (int32_t d = rank - 1; d >= 0; --d) {
      off += (r % shape[d]) * stride[d];
      r /= shape[d];
    }
    return off;
  }
};

// Sums n >= 1 rows (row(i) points at w elements) into out as the leaves of numpy's tree; r is
// scratch for 8 rows of w. The loops over j are the same additions for each output of a tile.
template <typename T, typename Rows>
void leaf_sum(const Rows &row, int64_t n, int64_t w, T *r, T *out) {
  if (w == 1 && n >= 8) {  // one output: its 8 accumulators in registers (a vector, when contiguous)
    T acc[8];
    for (int k = 0; k < 8; ++k) acc[k] = row(k)[0];
    int64_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (int k = 0; k < 8; ++k) acc[k] += row(i + k)[0];
    T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; ++i) s += row(i)[0];
    out[0] = s;
    return;
  }
  if (n < 8) {
    for (int64_t j = 0; j < w; ++j) out[j] = row(0)[j];
    for (int64_t i = 1; i < n; ++i)
      for (int64_t j = 0; j < w; ++j) out[j] += row(i)[j];
    return;
  }
  for (int k = 0; k < 8; ++k)
    for (int64_t j = 0; j < w; ++j) r[k * w + j] = row(k)[j];
  int64_t i = 8;
  for (; i < n - n % 8; i += 8)
    for (int k = 0; k < 8; ++k) {
      const T *x = row(i + k);
      for (int64_t j = 0; j < w; ++j) r[k * w + j] += x[j];
    }
  for (int64_t j = 0; j < w; ++j)
    out[j] = ((r[j] + r[w + j]) + (r[2 * w + j] + r[3 * w + j])) +
             ((r[4 * w + j] + r[5 * w + j]) + (r[6 * w + j] + r[7 * w + j]));
  for (; i < n; ++i)
    for (int64_t j = 0; j < w; ++j) out[j] += row(i)[j];
}

// One output element (w == 1) or a tile of w neighbouring ones: the pairwise sum over the
// reduced elements [lo, lo + n) into out[0..w).
template <typename T> class PairwiseSum {
public:
  PairwiseSum(const ReducedDims &rd, int64_t maxWidth)
      : rd_(rd), scratch_((8 + kMaxDepth) * maxWidth) {}

  void run(const T *base, int64_t w, T *out) {
    base_ = base;
    w_ = w;
    if (rd_.count == 0) {
      for (int64_t j = 0; j < w; ++j) out[j] = T(0);
      return;
    }
    sum(0, rd_.count, out, 0);
    for (int64_t j = 0; j < w; ++j) out[j] = T(0) + out[j];  // as numpy: 0 + (-0) is 0
  }

private:
  const ReducedDims &rd_;
  std::vector<T> scratch_;  // 8 rows for the leaves, then one row per level of the tree
  const T *base_ = nullptr;
  int64_t w_ = 1;

  void sum(int64_t lo, int64_t n, T *out, int depth) {
    if (n <= kLeaf) return leaf(lo, n, out);
    int64_t half = n / 2;
    half -= half % 8;
    sum(lo, half, out, depth + 1);
    T *right = scratch_.data() + (8 + depth) * w_;  // deeper levels use later rows
    sum(lo + half, n - half, right, depth + 1);
    for (int64_t j = 0; j < w_; ++j) out[j] += right[j];
  }

  // The rows of a leaf: a run of the innermost reduced dimension (one stride apart), or else
  // gathered with an odometer over the reduced dimensions.
  void leaf(int64_t lo, int64_t n, T *out) {
    const int32_t last = rd_.rank - 1;
    const T *first = base_ + rd_.offset(lo);
    if (lo % rd_.shape[last] + n <= rd_.shape[last]) {
      const int64_t s = rd_.stride[last];
      return leaf_sum(Strided{first, s}, n, w_, scratch_.data(), out);
    }
    const T *rows[kLeaf];
    int64_t idx[kMaxRank];
    int64_t rest = lo;
    for (int32_t d = last; d >= 0; --d) {
      idx[d] = rest % rd_.shape[d];
      rest /= rd_.shape[d];
    }
    const T *p = first;
    for (int64_t i = 0; i < n; ++i) {
      rows[i] = p;
      for (int32_t d = last; d >= 0; --d) {  // step the odometer
        p += rd_.stride[d];
        if (++idx[d] < rd_.shape[d]) break;
        p -= rd_.stride[d] * rd_.shape[d];
        idx[d] = 0;
      }
    }
    leaf_sum(Gathered{rows}, n, w_, scratch_.data(), out);
  }

  struct Strided {
    const T *base;
    int64_t stride;
    const T *operator()(int64_t i) const { return base + i * stride; }
  };
  struct Gathered {
    const T *const *rows;
    const T *operator()(int64_t i) const { return rows[i]; }
  };
};

// Float reduce_sum: splits the input's dimensions into the reduced ones and the kept ones
// (merging neighbours of the same kind and dropping dimensions of size 1), then runs a
// PairwiseSum per output element, or per tile of outputs where the last dimension is kept.
template <typename T>
void pairwise_reduce(const T *in, int32_t rank, const int64_t *shape, const bool *reduced,
                     T *out) {
  int64_t istr[kMaxRank];
  row_major_strides(rank, shape, istr);
  ReducedDims rd;
  int32_t kept = 0;
  int64_t kshape[kMaxRank], kstride[kMaxRank];
  bool lastKept = false;  // whether the last merged dimension is a kept one
  for (int32_t d = 0; d < rank; ++d) {
    if (shape[d] == 1) continue;
    if (shape[d] == 0) {  // no inputs: outputs (if any) are 0
      int64_t out_n = 1;
      for (int32_t e = 0; e < rank; ++e)
        if (!reduced[e]) out_n *= shape[e];
      for (int64_t i = 0; i < out_n; ++i) out[i] = T(0);
      return;
    }
    const bool merge = reduced[d] ? (rd.rank > 0 && !lastKept) : (kept > 0 && lastKept);
    int64_t *sh = reduced[d] ? rd.shape : kshape, *st = reduced[d] ? rd.stride : kstride;
    int32_t &n = reduced[d] ? rd.rank : kept;
    if (merge) {  // row-major: the previous dimension's stride is this one's times its size
      sh[n - 1] *= shape[d];
      st[n - 1] = istr[d];
    } else {
      sh[n] = shape[d];
      st[n] = istr[d];
      ++n;
    }
    lastKept = !reduced[d];
  }
  if (rd.rank == 0) {  // nothing (of size > 1) reduced: 0 + x, element by element
    int64_t n = 1;
    for (int32_t d = 0; d < kept; ++d) n *= kshape[d];
    for (int64_t i = 0; i < n; ++i) out[i] = T(0) + in[i];
    return;
  }
  for (int32_t d = 0; d < rd.rank; ++d) rd.count *= rd.shape[d];

  // Outputs are row-major over the kept dimensions; with the last one kept, its w outputs
  // are neighbours in both input and output and are summed in tiles.
  const int64_t w = lastKept ? kshape[kept - 1] : 1;
  const int32_t outer = lastKept ? kept - 1 : kept;
  PairwiseSum<T> ps(rd, std::min(w, kTile));
  int64_t idx[kMaxRank] = {0};
  int64_t base = 0;
  for (T *o = out;; o += w) {
    for (int64_t j = 0; j < w; j += kTile) ps.run(in + base + j, std::min(kTile, w - j), o + j);
    int32_t d = outer - 1;
    for (; d >= 0; --d) {
      base += kstride[d];
      if (++idx[d] < kshape[d]) break;
      base -= kstride[d] * kshape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

template <typename T>
void reduce_op(int32_t op, const void *in, int32_t rank, const int64_t *shape, const bool *reduced,
               void *out, int64_t out_n) {
  switch (op) {
  case SHM_REDUCE_SUM:
    if constexpr (std::is_floating_point_v<T>)
      return pairwise_reduce<T>((const T *)in, rank, shape, reduced, (T *)out);
    return reduce_t<T, SHM_REDUCE_SUM>((const T *)in, rank, shape, reduced, (T *)out, out_n);
  case SHM_REDUCE_MAX: return reduce_t<T, SHM_REDUCE_MAX>((const T *)in, rank, shape, reduced, (T *)out, out_n);
  case SHM_REDUCE_MIN: return reduce_t<T, SHM_REDUCE_MIN>((const T *)in, rank, shape, reduced, (T *)out, out_n);
  }
  fatalf("reduce: unknown op %d", (int)op);
}

// f16 / bf16: the input widened to f32, reduced as f32 (sums: the pairwise tree, in f32), and
// each output rounded once to the storage type.
void reduce_half(int32_t dtype, int32_t op, const void *in, int32_t rank, const int64_t *shape,
                 const bool *reduced, void *out, int64_t out_n) {
  const int64_t n = num_elements(rank, shape);
  std::vector<float> x((size_t)n), y((size_t)out_n);
  widen_half(dtype, in, x.data(), n);
  reduce_op<float>(op, x.data(), rank, shape, reduced, y.data(), out_n);
  narrow_half(dtype, y.data(), out, out_n);
}

// ---- matmul ---------------------------------------------------------------------------------

void matmul_i32(const int32_t *a, const int32_t *b, int32_t *c, int64_t m, int64_t k, int64_t n) {
  // i-k-j order: the inner loop streams rows of b and c. Unsigned arithmetic wraps.
  for (int64_t i = 0; i < m * n; ++i) c[i] = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const uint32_t av = (uint32_t)a[i * k + p];
      const int32_t *brow = b + p * n;
      int32_t *crow = c + i * n;
      for (int64_t j = 0; j < n; ++j) crow[j] = (int32_t)((uint32_t)crow[j] + av * (uint32_t)brow[j]);
    }
}

void matmul_i64(const int64_t *a, const int64_t *b, int64_t *c, int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m * n; ++i) c[i] = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const uint64_t av = (uint64_t)a[i * k + p];
      const int64_t *brow = b + p * n;
      int64_t *crow = c + i * n;
      for (int64_t j = 0; j < n; ++j) crow[j] = (int64_t)((uint64_t)crow[j] + av * (uint64_t)brow[j]);
    }
}

// A block stored transposed ([cols, rows] for a logical [rows, cols]), copied to row-major
// [rows, cols]: the integer matmuls (no BLAS) take their operands in the plain layout.
template <typename T>
std::vector<T> untransposed(const T *src, int64_t rows, int64_t cols) {
  std::vector<T> out((size_t)(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[(size_t)(r * cols + c)] = src[c * rows + r];
  return out;
}

template <typename T, typename F>
void int_matmul(F kernel, const char *a, const char *b, char *c, int64_t m, int64_t k, int64_t n,
                bool ta, bool tb) {
  std::vector<T> ac, bc;
  const T *ap = (const T *)a, *bp = (const T *)b;
  if (ta) ac = untransposed(ap, m, k), ap = ac.data();
  if (tb) bc = untransposed(bp, k, n), bp = bc.data();
  kernel(ap, bp, (T *)c, m, k, n);
}

} // namespace

extern "C" {

void shm_broadcast_in_dim(int32_t dtype, const void *in, int32_t in_rank, const int64_t *in_shape,
                          void *out, int32_t out_rank, const int64_t *out_shape,
                          const int64_t *bdims) {
  SHM_GUARD_BEGIN
  const char *what = "broadcast_in_dim";
  check_shape(in_rank, in_shape, what);
  check_shape(out_rank, out_shape, what);
  if (in_rank > out_rank) fatalf("%s: input rank %d exceeds output rank %d", what, (int)in_rank, (int)out_rank);
  int64_t istr[kMaxRank], sstr[kMaxRank], ostr[kMaxRank];
  row_major_strides(in_rank, in_shape, istr);
  row_major_strides(out_rank, out_shape, ostr);
  // Source stride per output dimension: that of the input dimension mapped onto it, or 0
  // (repeat) for new dimensions and input dimensions of size 1.
  for (int32_t d = 0; d < out_rank; ++d) sstr[d] = 0;
  for (int32_t i = 0; i < in_rank; ++i) {
    const int64_t d = bdims[i];
    if (d < 0 || d >= out_rank) fatalf("%s: broadcast dimension %lld out of range", what, (long long)d);
    if (in_shape[i] != 1 && in_shape[i] != out_shape[d])
      fatalf("%s: input dimension %d (size %lld) does not match output dimension %lld (size %lld)",
             what, (int)i, (long long)in_shape[i], (long long)d, (long long)out_shape[d]);
    if (in_shape[i] != 1) sstr[d] = istr[i];
  }
  copy_strided(dtype_size(dtype), out_rank, out_shape, in, sstr, out, ostr);
  SHM_GUARD_END("broadcast_in_dim")
}

void shm_transpose(int32_t dtype, const void *in, int32_t rank, const int64_t *in_shape,
                   const int64_t *perm, void *out) {
  SHM_GUARD_BEGIN
  check_shape(rank, in_shape, "transpose");
  int64_t istr[kMaxRank], oshape[kMaxRank], sstr[kMaxRank], ostr[kMaxRank];
  bool seen[kMaxRank] = {false};
  row_major_strides(rank, in_shape, istr);
  for (int32_t d = 0; d < rank; ++d) {
    const int64_t p = perm[d];
    if (p < 0 || p >= rank || seen[p]) fatalf("transpose: invalid permutation");
    seen[p] = true;
    oshape[d] = in_shape[p];
    sstr[d] = istr[p];
  }
  row_major_strides(rank, oshape, ostr);
  copy_strided(dtype_size(dtype), rank, oshape, in, sstr, out, ostr);
  SHM_GUARD_END("transpose")
}

void shm_reduce(int32_t dtype, int32_t op, const void *in, int32_t rank, const int64_t *shape,
                const int64_t *axes, int32_t naxes, void *out) {
  SHM_GUARD_BEGIN
  check_shape(rank, shape, "reduce");
  if (naxes < 0 || naxes > rank) fatalf("reduce: %d axes for rank %d", (int)naxes, (int)rank);
  bool reduced[kMaxRank] = {false};
  int64_t out_n = 1;
  for (int32_t k = 0; k < naxes; ++k) {
    const int64_t a = axes[k];
    if (a < 0 || a >= rank || (k > 0 && a <= axes[k - 1]))
      fatalf("reduce: axes must be sorted, distinct and in range");
    reduced[a] = true;
  }
  for (int32_t d = 0; d < rank; ++d)
    if (!reduced[d]) out_n *= shape[d];
  switch (dtype) {
  case SHM_F32: reduce_op<float>(op, in, rank, shape, reduced, out, out_n); break;
  case SHM_F64: reduce_op<double>(op, in, rank, shape, reduced, out, out_n); break;
  case SHM_I32: reduce_op<int32_t>(op, in, rank, shape, reduced, out, out_n); break;
  case SHM_BOOL: reduce_op<uint8_t>(op, in, rank, shape, reduced, out, out_n); break;
  case SHM_I64: reduce_op<int64_t>(op, in, rank, shape, reduced, out, out_n); break;
  case SHM_F16:
  case SHM_BF16: reduce_half(dtype, op, in, rank, shape, reduced, out, out_n); break;
  default: fatalf("reduce: unknown dtype code %d", (int)dtype);
  }
  SHM_GUARD_END("reduce")
}

namespace {

// SHMAP_BLAS=openblas disables oneDNN (matmul_kernels.h: which kernel computes what).
bool dnnl_enabled() {
  static const bool on = [] {
    const char *e = std::getenv("SHMAP_BLAS");
    return !(e && std::strcmp(e, "openblas") == 0);
  }();
  return on;
}

// C[:, lo:hi] = op(A) @ op(B)[:, lo:hi], row-major, C's leading dimension n, by `kernel`
// (DnnlSgemm or OpenblasSgemm: matmul_panel_kernel).
void sgemm_columns(MatmulKernel kernel, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                   int64_t lda, const float *b, int64_t ldb, float *c, int64_t lo, int64_t hi) {
  const float *bp = tb ? b + lo * ldb : b + lo;
  if (kernel == MatmulKernel::DnnlSgemm) {
    // Each thread is one core's worth of work: oneDNN's OpenMP team in it is that thread alone
    // (the setting is per thread, made once).
    static thread_local const bool one_thread = (omp_set_num_threads(1), true);
    (void)one_thread;
    if (dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, hi - lo, k, 1.0f, a, lda, bp, ldb, 0.0f, c + lo, n) ==
        dnnl_success)
      return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)(hi - lo),
              (int)k, 1.0f, a, (int)lda, bp, (int)ldb, 0.0f, c + lo, (int)n);
}

// C[m, n] = op(A) @ op(B) in the column panels `choice` names (sgemm_panels: the same whatever
// the number of cores, so the result does not depend on it), shared by the team's cores.
void sgemm(const MatmulChoice &choice, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
           int64_t lda, const float *b, int64_t ldb, float *c) {
  const int64_t panels = choice.panels;
  auto panel = [&](int64_t p) { return sgemm_panel_start(p, panels, n); };
  const int parts = (int)std::min<int64_t>(shm::team_size(), panels);
  shm::run_on_team(parts, [&](int i) {
    for (int64_t p = panels * i / parts; p < panels * (i + 1) / parts; ++p)
      sgemm_columns(matmul_panel_kernel(choice, p), ta, tb, m, n, k, a, lda, b, ldb, c, panel(p), panel(p + 1));
  });
}

} // namespace

void shm_matmul(int32_t dtype, const void *lhs, const void *rhs, void *out, int64_t batch,
                int64_t m, int64_t k, int64_t n, int32_t trans_lhs, int32_t trans_rhs) {
  SHM_GUARD_BEGIN
  TraceScope span("matmul", "compute");
  if (span.name)
    span.args = "\"batch\":" + std::to_string(batch) + ",\"m\":" + std::to_string(m) + ",\"k\":" + std::to_string(k) +
                ",\"n\":" + std::to_string(n);
  if (batch < 0 || m < 0 || k < 0 || n < 0) fatalf("matmul: negative dimension");
  // Which kernel, in how many calls (matmul_kernels.h, which --emit=plan prints too).
  const MatmulChoice choice = matmul_choice(dtype, batch, m, k, n, dnnl_enabled());
  if (choice.kernel == MatmulKernel::None) return;
  const int64_t es = dtype_size(dtype);
  if (choice.kernel == MatmulKernel::Zeros) { // BLAS would reject a leading dimension of 0
    std::memset(out, 0, (size_t)(batch * m * n * es));
    return;
  }
  if (choice.kernel == MatmulKernel::TooLarge) fatalf("matmul: dimension too large for BLAS");
  // Row-major BLAS: an operand stored transposed has the other dimension as its leading one.
  const CBLAS_TRANSPOSE ta = trans_lhs ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_rhs ? CblasTrans : CblasNoTrans;
  const int lda = (int)(trans_lhs ? m : k), ldb = (int)(trans_rhs ? k : n);
  if (choice.widened) {  // f16 / bf16: sgemm on the operands widened to f32, rounded once
    std::vector<float> a((size_t)(m * k)), bb((size_t)(k * n)), c((size_t)(m * n));
    for (int64_t b = 0; b < batch; ++b) {
      widen_half(dtype, (const char *)lhs + b * m * k * es, a.data(), m * k);
      widen_half(dtype, (const char *)rhs + b * k * n * es, bb.data(), k * n);
      sgemm(choice, trans_lhs, trans_rhs, m, n, k, a.data(), lda, bb.data(), ldb, c.data());
      narrow_half(dtype, c.data(), (char *)out + b * m * n * es, m * n);
    }
    return;
  }
  if (choice.kernel == MatmulKernel::Unsupported) fatalf("matmul: unsupported dtype %s", dtype_name(dtype));
  auto product = [&](int64_t b) {
    const char *a = (const char *)lhs + b * m * k * es;
    const char *bb = (const char *)rhs + b * k * n * es;
    char *c = (char *)out + b * m * n * es;
    switch (matmul_family(dtype)) {
    case MatmulFamily::Sgemm:
      sgemm(choice, trans_lhs, trans_rhs, m, n, k, (const float *)a, lda, (const float *)bb, ldb, (float *)c);
      break;
    case MatmulFamily::Dgemm:
      cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0, (const double *)a, lda,
                  (const double *)bb, ldb, 0.0, (double *)c, (int)n);
      break;
    case MatmulFamily::OwnLoop:
      if (dtype == SHM_I32) int_matmul<int32_t>(matmul_i32, a, bb, c, m, k, n, trans_lhs, trans_rhs);
      else int_matmul<int64_t>(matmul_i64, a, bb, c, m, k, n, trans_lhs, trans_rhs);
      break;
    case MatmulFamily::WidenedSgemm:
    case MatmulFamily::Unsupported: break;  // (handled above)
    }
  };
  // A batch of products each too small to split (sgemm's panels), together large enough: the
  // team's cores share the batch (each product computed whole, so the result is the same).
  const int parts = choice.batch_shared ? (int)std::min<int64_t>(team_size(), batch) : 1;
  run_on_team(parts, [&](int i) {
    for (int64_t b = batch * i / parts; b < batch * (i + 1) / parts; ++b) product(b);
  });
  SHM_GUARD_END("matmul")
}

void shm_slice(int32_t dtype, const void *in, int32_t rank, const int64_t *shape,
               const int64_t *start, const int64_t *limit, const int64_t *strides, void *out) {
  SHM_GUARD_BEGIN
  check_shape(rank, shape, "slice");
  int64_t istr[kMaxRank], oshape[kMaxRank], sstr[kMaxRank], ostr[kMaxRank];
  row_major_strides(rank, shape, istr);
  int64_t off = 0;
  for (int32_t d = 0; d < rank; ++d) {
    const int64_t st = strides ? strides[d] : 1;
    if (st < 1 || start[d] < 0 || limit[d] > shape[d] || start[d] > limit[d])
      fatalf("slice: invalid bounds [%lld:%lld:%lld] for dimension %d of size %lld",
             (long long)start[d], (long long)limit[d], (long long)st, (int)d, (long long)shape[d]);
    oshape[d] = (limit[d] - start[d] + st - 1) / st;
    sstr[d] = istr[d] * st;
    off += start[d] * istr[d];
  }
  row_major_strides(rank, oshape, ostr);
  const int64_t es = dtype_size(dtype);
  if (num_elements(rank, oshape) == 0) return;
  copy_strided(es, rank, oshape, (const char *)in + off * es, sstr, out, ostr);
  SHM_GUARD_END("slice")
}

void shm_dynamic_slice(int32_t dtype, const void *in, int32_t rank, const int64_t *shape,
                       const int64_t *start, const int64_t *sizes, void *out) {
  SHM_GUARD_BEGIN
  check_shape(rank, shape, "dynamic_slice");
  int64_t istr[kMaxRank], ostr[kMaxRank];
  row_major_strides(rank, shape, istr);
  row_major_strides(rank, sizes, ostr);
  int64_t off = 0;
  for (int32_t d = 0; d < rank; ++d) {
    if (sizes[d] < 0 || sizes[d] > shape[d])
      fatalf("dynamic_slice: size %lld exceeds dimension %d of size %lld", (long long)sizes[d],
             (int)d, (long long)shape[d]);
    off += clamp_start(start[d], shape[d], sizes[d]) * istr[d];
  }
  const int64_t es = dtype_size(dtype);
  if (num_elements(rank, sizes) == 0) return;
  copy_strided(es, rank, sizes, (const char *)in + off * es, istr, out, ostr);
  SHM_GUARD_END("dynamic_slice")
}

void shm_dynamic_update_slice(int32_t dtype, const void *in, int32_t rank, const int64_t *shape,
                              const void *upd, const int64_t *upd_shape, const int64_t *start,
                              void *out) {
  SHM_GUARD_BEGIN
  check_shape(rank, shape, "dynamic_update_slice");
  const int64_t es = dtype_size(dtype);
  int64_t ostr[kMaxRank], ustr[kMaxRank];
  row_major_strides(rank, shape, ostr);
  row_major_strides(rank, upd_shape, ustr);
  int64_t off = 0;
  for (int32_t d = 0; d < rank; ++d) {
    if (upd_shape[d] < 0 || upd_shape[d] > shape[d])
      fatalf("dynamic_update_slice: update dimension %d of size %lld exceeds %lld", (int)d,
             (long long)upd_shape[d], (long long)shape[d]);
    off += clamp_start(start[d], shape[d], upd_shape[d]) * ostr[d];
  }
  if (out != in) shm_copy(out, in, num_elements(rank, shape) * es);
  if (num_elements(rank, upd_shape) == 0) return;
  copy_strided(es, rank, upd_shape, upd, ustr, (char *)out + off * es, ostr);
  SHM_GUARD_END("dynamic_update_slice")
}

void shm_concatenate(int32_t dtype, int32_t n, const void *const *ins, int32_t rank,
                     const int64_t *shapes, int32_t axis, void *out) {
  SHM_GUARD_BEGIN
  check_rank(rank, "concatenate");
  if (n < 1) fatalf("concatenate: no operands");
  if (axis < 0 || axis >= rank) fatalf("concatenate: axis %d out of range for rank %d", (int)axis, (int)rank);
  for (int32_t i = 0; i < n; ++i) {
    check_shape(rank, shapes + i * rank, "concatenate");
    for (int32_t d = 0; d < rank; ++d)
      if (d != axis && shapes[i * rank + d] != shapes[d])
        fatalf("concatenate: operand %d differs from operand 0 in dimension %d", (int)i, (int)d);
  }
  const int64_t es = dtype_size(dtype);
  int64_t outer = 1, inner = es; // inner: bytes of one slice below `axis`
  for (int32_t d = 0; d < axis; ++d) outer *= shapes[d];
  for (int32_t d = axis + 1; d < rank; ++d) inner *= shapes[d];
  char *dst = (char *)out;
  for (int64_t o = 0; o < outer; ++o)
    for (int32_t i = 0; i < n; ++i) {
      const int64_t bytes = shapes[i * rank + axis] * inner;
      shm_copy(dst, (const char *)ins[i] + o * bytes, bytes);
      dst += bytes;
    }
  SHM_GUARD_END("concatenate")
}

void shm_iota(int32_t dtype, void *out, int32_t rank, const int64_t *shape, int32_t dim) {
  SHM_GUARD_BEGIN
  check_shape(rank, shape, "iota");
  if (rank == 0 ? dim != 0 : (dim < 0 || dim >= rank))
    fatalf("iota: dimension %d out of range for rank %d", (int)dim, (int)rank);
  int64_t inner = 1;
  for (int32_t d = dim + 1; d < rank; ++d) inner *= shape[d];
  const int64_t len = rank == 0 ? 1 : shape[dim];
  const int64_t total = num_elements(rank, shape);
  // Element i has index (i / inner) % len along dim.
  for (int64_t i = 0; i < total; ++i) {
    const int64_t v = (i / inner) % len;
    switch (dtype) {
    case SHM_F32: ((float *)out)[i] = (float)v; break;
    case SHM_F64: ((double *)out)[i] = (double)v; break;
    case SHM_I32: ((int32_t *)out)[i] = (int32_t)v; break;
    case SHM_I64: ((int64_t *)out)[i] = v; break;
    case SHM_F16: ((uint16_t *)out)[i] = f32_to_f16((float)v); break;
    case SHM_BF16: ((uint16_t *)out)[i] = f32_to_bf16((float)v); break;
    default: fatalf("iota: unsupported dtype %s", dtype_name(dtype));
    }
  }
  SHM_GUARD_END("iota")
}

} // extern "C"
