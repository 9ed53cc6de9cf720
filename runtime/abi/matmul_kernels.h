// Which kernel computes a matmul, and in how many calls: the one place the choice is written.
// The runtime's shm_matmul (runtime/kernels.cpp) computes by it at run time, and codegen's
// --emit=plan (compiler/codegen/Plan.cpp) prints it for each matmul before the program runs,
// so the two cannot drift apart. Header-only, C++: both the compiler and the runtime include it.
//
// The choice depends on the dtype, the sizes and whether oneDNN is enabled, nothing else:
// - f32: products of at least kDnnlMinMacs multiply-adds (32^3) go to oneDNN's dnnl_sgemm,
//   which picks AVX-512 kernels at run time (1024^3: 2.0x OpenBLAS's Haswell kernels on the
//   machine this was measured on); smaller ones to OpenBLAS's cblas_sgemm (oneDNN's fixed cost
//   is ~0.2 us). SHMAP_BLAS=openblas disables oneDNN and sends every product to OpenBLAS
//   (README, "Measured choices"). oneDNN is a required dependency of every runtime build
//   (CMakeLists.txt finds DNNL_LIB REQUIRED, kernels.cpp calls dnnl_sgemm unconditionally and
//   shmapc links every program against it), so "enabled" depends on SHMAP_BLAS alone.
// - f32 products of at least kPanelMinMacs multiply-adds are computed in column panels of
//   kPanel columns (the last one up to twice as wide), each its own BLAS call, which the cores
//   of the device thread's team share; the kDnnlMinMacs test then applies to each panel's call.
// - f16 / bf16: the operands widened to f32 and multiplied by the f32 choice, the product
//   rounded once.
// - f64: OpenBLAS's cblas_dgemm, one call per product.
// - i32 / i64: the runtime's own wrapping i-k-j loop.
// - a batch of products each below kPanelMinMacs but together at least that many: the team's
//   cores share the batch (each product whole; not for f16 / bf16, which widen one at a time).
#ifndef SHMAP_RUNTIME_MATMUL_KERNELS_H
#define SHMAP_RUNTIME_MATMUL_KERNELS_H
#include "shmap_runtime.h"

#include <cstdint>
#include <limits>

namespace shm {

// f32 products of at least this many multiply-adds go to oneDNN (when enabled).
constexpr int64_t kDnnlMinMacs = 32 * 32 * 32;

// Products of at least this many multiply-adds are computed in column panels of kPanel (the
// last one up to twice as wide), which the cores of the thread's team share (run_on_team).
// Each panel's call packs the whole of op(A) again: at 256 columns that cost a one-core MLP
// step (256 x 512 x 1024 products) 7% over whole calls, at 512 half as much, while a panel of
// 512 columns of such a product is still ~0.35 ms of work against the tens of microseconds a
// hand-off costs (the price: a product of fewer than 1024 columns is not shared).
constexpr int64_t kPanelMinMacs = int64_t(1) << 22;
constexpr int64_t kPanel = 512;

// a * b for non-negative sizes, saturated at INT64_MAX. Under the element limit
// (SHM_MAX_ELEMENTS = 2^40 per array: (m n k)^2 = (m k)(k n)(m n)) a product's and a batch's
// multiply-adds stay below 2^60, so this is plain multiplication for every program shmapc
// compiles; a caller linked by other means with larger sizes gets a count still above every
// threshold instead of a wrapped one.
inline int64_t macs_product(int64_t a, int64_t b) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) return std::numeric_limits<int64_t>::max();
  return a * b;
}
inline int64_t matmul_macs(int64_t m, int64_t n, int64_t k) { return macs_product(macs_product(m, n), k); }

enum class MatmulKernel {
  None,          // nothing to compute: m, n or batch is 0
  Zeros,         // k is 0: the result is zeros (BLAS rejects a leading dimension of 0)
  DnnlSgemm,     // oneDNN's dnnl_sgemm
  OpenblasSgemm, // OpenBLAS's cblas_sgemm
  OpenblasDgemm, // OpenBLAS's cblas_dgemm
  OwnLoop,       // the runtime's wrapping i-k-j loop (i32, i64)
  TooLarge,      // refused at run time: a dimension exceeds BLAS's int
  Unsupported,   // refused at run time: no matmul for this dtype (bool)
};

// How the runtime multiplies dtype's operands: the family of kernels, before the sizes choose.
enum class MatmulFamily { Sgemm, WidenedSgemm, Dgemm, OwnLoop, Unsupported };

inline MatmulFamily matmul_family(int32_t dtype) {
  switch (dtype) {
  case SHM_F32: return MatmulFamily::Sgemm;
  case SHM_F16:
  case SHM_BF16: return MatmulFamily::WidenedSgemm;
  case SHM_F64: return MatmulFamily::Dgemm;
  case SHM_I32:
  case SHM_I64: return MatmulFamily::OwnLoop;
  default: return MatmulFamily::Unsupported;
  }
}

// The kernel of one sgemm call computing `cols` columns of an m x k by k x n product.
inline MatmulKernel sgemm_kernel(int64_t m, int64_t cols, int64_t k, bool dnnl_enabled) {
  return matmul_macs(m, cols, k) >= kDnnlMinMacs && dnnl_enabled ? MatmulKernel::DnnlSgemm
                                                                 : MatmulKernel::OpenblasSgemm;
}

// The number of column panels an m x k by k x n f32 product is computed in: panel p covers the
// columns [sgemm_panel_start(p), sgemm_panel_start(p + 1)). The same whatever the number of
// cores, so the result does not depend on it: oneDNN's result for a panel of columns is not
// always the same as for the whole (a different blocking of k; 82 of 3,597 random shapes split
// in 2-4 differed in some bits), so the panels are the definition of the product.
inline int64_t sgemm_panels(int64_t m, int64_t n, int64_t k) {
  return matmul_macs(m, n, k) >= kPanelMinMacs && n / kPanel > 1 ? n / kPanel : 1;
}
inline int64_t sgemm_panel_start(int64_t p, int64_t panels, int64_t n) { return p == panels ? n : p * kPanel; }

// Whether the team's cores share a batch of products (each computed whole by one core).
inline bool matmul_batch_shared(int32_t dtype, int64_t batch, int64_t m, int64_t n, int64_t k) {
  if (matmul_family(dtype) == MatmulFamily::WidenedSgemm) return false;
  const int64_t macs = matmul_macs(m, n, k);
  return batch > 1 && macs < kPanelMinMacs && macs_product(macs, batch) >= kPanelMinMacs;
}

// The whole choice for shm_matmul(dtype, ..., batch, m, k, n, ...) with non-negative sizes.
struct MatmulChoice {
  MatmulKernel kernel = MatmulKernel::None;       // every panel's but the last (one panel: the whole's)
  MatmulKernel last_kernel = MatmulKernel::None;  // the last panel's: it can be wider, so at least
                                                  // kDnnlMinMacs where the others are not
  bool widened = false;                           // f16 / bf16 computed in f32
  int64_t panels = 1;                             // column panels per product (f32 and widened)
  int64_t last_width = 0;                         // columns of the last panel (n when one)
  bool batch_shared = false;                      // the batch's products shared by the team
};

// In the order shm_matmul tests them: empty, k == 0, too large for BLAS, then the dtype.
inline MatmulChoice matmul_choice(int32_t dtype, int64_t batch, int64_t m, int64_t k, int64_t n,
                                  bool dnnl_enabled) {
  MatmulChoice c;
  auto only = [&](MatmulKernel kind) {
    c.kernel = c.last_kernel = kind;
    c.last_width = n;
    return c;
  };
  if (m == 0 || n == 0 || batch == 0) return only(MatmulKernel::None);
  if (k == 0) return only(MatmulKernel::Zeros);
  if ((m | k | n) > (int64_t)std::numeric_limits<int>::max()) return only(MatmulKernel::TooLarge);
  switch (matmul_family(dtype)) {
  case MatmulFamily::Unsupported: return only(MatmulKernel::Unsupported);
  case MatmulFamily::Dgemm: only(MatmulKernel::OpenblasDgemm); break;
  case MatmulFamily::OwnLoop: only(MatmulKernel::OwnLoop); break;
  case MatmulFamily::WidenedSgemm:
  case MatmulFamily::Sgemm:
    c.widened = matmul_family(dtype) == MatmulFamily::WidenedSgemm;
    c.panels = sgemm_panels(m, n, k);
    c.last_width = n - sgemm_panel_start(c.panels - 1, c.panels, n);
    c.kernel = sgemm_kernel(m, c.panels > 1 ? kPanel : n, k, dnnl_enabled);
    c.last_kernel = sgemm_kernel(m, c.last_width, k, dnnl_enabled);
    break;
  }
  c.batch_shared = matmul_batch_shared(dtype, batch, m, n, k);
  return c;
}

// The kernel of panel p of a product chosen as c.
inline MatmulKernel matmul_panel_kernel(const MatmulChoice &c, int64_t p) {
  return p == c.panels - 1 ? c.last_kernel : c.kernel;
}

} // namespace shm

#endif
