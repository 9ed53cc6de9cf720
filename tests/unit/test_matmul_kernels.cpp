// The matmul kernel choice of runtime/abi/matmul_kernels.h, which the runtime computes by and
// --emit=plan prints: its boundaries, worked out by hand from the thresholds (32^3 = 32768
// multiply-adds for oneDNN, 2^22 = 4194304 for column panels of 512, the last up to 1023
// wide), and shm_matmul's results, bit for bit, against the library kernels called directly
// as the choice names them (so the runtime computes by the choice, panels included).
#include <catch2/catch.hpp>

#include "matmul_kernels.h"
#include "shmap_runtime.h"

#include <cblas.h>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <random>
#include <vector>

using namespace shm;

namespace {

MatmulChoice choose(int32_t dtype, int64_t m, int64_t k, int64_t n, bool dnnl = true, int64_t batch = 1) {
  return matmul_choice(dtype, batch, m, k, n, dnnl);
}

} // namespace

TEST_CASE("matmul kernels: f32 goes to oneDNN from 32^3 multiply-adds up", "[matmul_kernels]") {
  CHECK(kDnnlMinMacs == 32768);
  // 31 x 32 x 32 = 31744 < 32768: OpenBLAS; 32 x 32 x 32 = 32768: oneDNN, unless disabled.
  CHECK(choose(SHM_F32, 31, 32, 32).kernel == MatmulKernel::OpenblasSgemm);
  CHECK(choose(SHM_F32, 32, 32, 32).kernel == MatmulKernel::DnnlSgemm);
  CHECK(choose(SHM_F32, 32, 32, 32, false).kernel == MatmulKernel::OpenblasSgemm);
  // The count is m * n * k, whichever dimension holds it: 1 x 32767 x 1 and 1 x 32768 x 1 (n).
  CHECK(choose(SHM_F32, 1, 1, 32767).kernel == MatmulKernel::OpenblasSgemm);
  CHECK(choose(SHM_F32, 1, 1, 32768).kernel == MatmulKernel::DnnlSgemm);
  CHECK(choose(SHM_F32, 1, 32768, 1).kernel == MatmulKernel::DnnlSgemm);
  CHECK(choose(SHM_F32, 32768, 1, 1).kernel == MatmulKernel::DnnlSgemm);
  for (const auto &c : {choose(SHM_F32, 31, 32, 32), choose(SHM_F32, 32, 32, 32)}) {
    CHECK(c.panels == 1);
    CHECK(c.last_width == 32);
    CHECK(c.last_kernel == c.kernel);
    CHECK(!c.widened);
    CHECK(!c.batch_shared);
  }
  // sgemm_kernel is the test per call (per panel): m * cols * k.
  CHECK(sgemm_kernel(32, 31, 32, true) == MatmulKernel::OpenblasSgemm);
  CHECK(sgemm_kernel(32, 32, 32, true) == MatmulKernel::DnnlSgemm);
  CHECK(sgemm_kernel(32, 32, 32, false) == MatmulKernel::OpenblasSgemm);
}

TEST_CASE("matmul kernels: column panels from 2^22 multiply-adds and 1024 columns", "[matmul_kernels]") {
  CHECK(kPanelMinMacs == 4194304);
  CHECK(kPanel == 512);
  // 1 x 4096 x 1024 = 2^22: 1024 / 512 = 2 panels of 512; k 4095: one call.
  MatmulChoice c = choose(SHM_F32, 1, 4096, 1024);
  CHECK(c.panels == 2);
  CHECK(c.last_width == 512);
  CHECK(choose(SHM_F32, 1, 4095, 1024).panels == 1);
  // Fewer than 1024 columns: one call however large (1023 / 512 = 1).
  c = choose(SHM_F32, 4096, 4096, 1023);
  CHECK(c.panels == 1);
  CHECK(c.last_width == 1023);
  // 1535 columns: 2 panels, [0, 512) and [512, 1535) (1023 wide); 1536: 3 of 512.
  c = choose(SHM_F32, 64, 4096, 1535);
  CHECK(c.panels == 2);
  CHECK(c.last_width == 1023);
  CHECK(sgemm_panel_start(0, 2, 1535) == 0);
  CHECK(sgemm_panel_start(1, 2, 1535) == 512);
  CHECK(sgemm_panel_start(2, 2, 1535) == 1535);
  c = choose(SHM_F32, 64, 4096, 1536);
  CHECK(c.panels == 3);
  CHECK(c.last_width == 512);
  CHECK(c.kernel == MatmulKernel::DnnlSgemm);
  CHECK(c.last_kernel == MatmulKernel::DnnlSgemm);
  // A panel below 32^3 where the whole is not: 1 x 63 x 70000 = 4410000 >= 2^22, 70000 / 512
  // = 136 panels; 63 * 512 = 32256 < 32768 (OpenBLAS), the last 70000 - 135 * 512 = 880 wide,
  // 63 * 880 = 55440 (oneDNN).
  c = choose(SHM_F32, 1, 63, 70000);
  CHECK(c.panels == 136);
  CHECK(c.last_width == 880);
  CHECK(c.kernel == MatmulKernel::OpenblasSgemm);
  CHECK(c.last_kernel == MatmulKernel::DnnlSgemm);
  CHECK(matmul_panel_kernel(c, 0) == MatmulKernel::OpenblasSgemm);
  CHECK(matmul_panel_kernel(c, 134) == MatmulKernel::OpenblasSgemm);
  CHECK(matmul_panel_kernel(c, 135) == MatmulKernel::DnnlSgemm);
  c = choose(SHM_F32, 1, 63, 70000, false);
  CHECK(c.kernel == MatmulKernel::OpenblasSgemm);
  CHECK(c.last_kernel == MatmulKernel::OpenblasSgemm);
  // The largest product the element limit allows (2^20 x 2^20 operands: 2^60 multiply-adds)
  // is counted exactly; sizes past it (not from a compiled program: 2^42-element operands)
  // are counted saturated, not wrapped: still oneDNN, 2^21 / 512 = 4096 panels.
  CHECK(matmul_macs(int64_t(1) << 20, int64_t(1) << 20, int64_t(1) << 20) == int64_t(1) << 60);
  const int64_t big = int64_t(1) << 21;
  CHECK(matmul_macs(big, big, big) == std::numeric_limits<int64_t>::max());
  c = choose(SHM_F32, big, big, big);
  CHECK(c.kernel == MatmulKernel::DnnlSgemm);
  CHECK(c.panels == 4096);
}

TEST_CASE("matmul kernels: other dtypes, empty and refused products, shared batches", "[matmul_kernels]") {
  // f64: cblas_dgemm at any size, never in panels; i32 / i64: the own loop.
  for (int64_t s : {2, 32, 2048}) {
    CHECK(choose(SHM_F64, s, s, s).kernel == MatmulKernel::OpenblasDgemm);
    CHECK(choose(SHM_F64, s, s, s).panels == 1);
    CHECK(choose(SHM_I32, s, s, s).kernel == MatmulKernel::OwnLoop);
    CHECK(choose(SHM_I64, s, s, s).kernel == MatmulKernel::OwnLoop);
  }
  // f16 / bf16: widened to f32, the f32 choice (thresholds and panels).
  for (int32_t dt : {SHM_F16, SHM_BF16}) {
    CHECK(choose(dt, 31, 32, 32).kernel == MatmulKernel::OpenblasSgemm);
    const MatmulChoice c = choose(dt, 64, 4096, 1536);
    CHECK(c.widened);
    CHECK(c.kernel == MatmulKernel::DnnlSgemm);
    CHECK(c.panels == 3);
  }
  CHECK(choose(SHM_BOOL, 4, 4, 4).kernel == MatmulKernel::Unsupported);
  // In shm_matmul's order: empty before k == 0 before too large before the dtype.
  CHECK(choose(SHM_F32, 0, 4, 4).kernel == MatmulKernel::None);
  CHECK(choose(SHM_F32, 4, 4, 0).kernel == MatmulKernel::None);
  CHECK(choose(SHM_F32, 4, 4, 4, true, 0).kernel == MatmulKernel::None);
  CHECK(choose(SHM_BOOL, 0, 0, 4).kernel == MatmulKernel::None);
  CHECK(choose(SHM_F32, 4, 0, 4).kernel == MatmulKernel::Zeros);
  CHECK(choose(SHM_BOOL, 4, 0, 4).kernel == MatmulKernel::Zeros);
  const int64_t intMax = std::numeric_limits<int>::max();
  // 1 x 1 x (2^31 - 1): 4194303 panels of 512 (1 x 512 x 1 each: OpenBLAS), the last
  // 2^31 - 1 - 4194302 * 512 = 1023 wide (OpenBLAS too).
  const MatmulChoice widest = choose(SHM_F32, 1, 1, intMax);
  CHECK(widest.kernel == MatmulKernel::OpenblasSgemm);
  CHECK(widest.panels == 4194303);
  CHECK(widest.last_width == 1023);
  CHECK(widest.last_kernel == MatmulKernel::OpenblasSgemm);
  CHECK(choose(SHM_F32, 1, 1, intMax + 1).kernel == MatmulKernel::TooLarge);
  CHECK(choose(SHM_BOOL, 1, intMax + 1, 1).kernel == MatmulKernel::TooLarge);
  // A batch is shared when each product is below 2^22 and all together are not: 16 x 64^3 =
  // 2^22, 15 x 64^3 below; not a batch of one, nor products that are split in panels
  // themselves, nor f16 / bf16 (widened one product at a time).
  CHECK(choose(SHM_F32, 64, 64, 64, true, 16).batch_shared);
  CHECK(choose(SHM_F64, 64, 64, 64, true, 16).batch_shared);
  CHECK(choose(SHM_I32, 64, 64, 64, true, 16).batch_shared);
  CHECK(!choose(SHM_F32, 64, 64, 64, true, 15).batch_shared);
  CHECK(!choose(SHM_F32, 1, 4096, 1024, true, 16).batch_shared);
  CHECK(!choose(SHM_F16, 64, 64, 64, true, 16).batch_shared);
  CHECK(!choose(SHM_F32, 2048, 2048, 2048, true, 1).batch_shared);
}

namespace {

// What shm_matmul must compute for an f32 product (no transposes): each of the choice's
// panels by the kernel it names, called directly.
std::vector<float> reference(const std::vector<float> &a, const std::vector<float> &b, int64_t m, int64_t k,
                             int64_t n) {
  const MatmulChoice c = matmul_choice(SHM_F32, 1, m, k, n, true);
  std::vector<float> out((size_t)(m * n));
  for (int64_t p = 0; p < c.panels; ++p) {
    const int64_t lo = sgemm_panel_start(p, c.panels, n), hi = sgemm_panel_start(p + 1, c.panels, n);
    if (matmul_panel_kernel(c, p) == MatmulKernel::DnnlSgemm)
      REQUIRE(dnnl_sgemm('N', 'N', m, hi - lo, k, 1.0f, a.data(), k, b.data() + lo, n, 0.0f, out.data() + lo, n) ==
              dnnl_success);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)(hi - lo), (int)k, 1.0f, a.data(), (int)k,
                  b.data() + lo, (int)n, 0.0f, out.data() + lo, (int)n);
  }
  return out;
}

} // namespace

TEST_CASE("shm_matmul computes by the choice: its kernels and panels, bit for bit", "[matmul_kernels][blas]") {
  openblas_set_num_threads(1);  // as the runtime's main() sets it; oneDNN: one thread, as in shm_matmul
  omp_set_num_threads(1);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // Each side of 32^3 (3 x 1000 x 10 = 30000, 3 x 1000 x 11 = 33000: with k that long most of
  // oneDNN's and OpenBLAS's bits differ on the machine this was written on, so the wrong kernel
  // fails here), odd sizes, 2 panels by oneDNN (2 x 2000 x 1100 = 4400000 >= 2^22: 512 and 588
  // columns), and 136 panels by OpenBLAS (3 x 21 x 512 = 32256) with the last, 880 wide, by
  // oneDNN (3 x 21 x 880 = 55440).
  const int64_t sizes[][3] = {{3, 1000, 10}, {3, 1000, 11}, {37, 41, 29}, {2, 2000, 1100}, {3, 21, 70000}};
  for (const auto &s : sizes) {
    const int64_t m = s[0], k = s[1], n = s[2];
    std::vector<float> a((size_t)(m * k)), b((size_t)(k * n)), out((size_t)(m * n));
    for (float &x : a) x = u(rng);
    for (float &x : b) x = u(rng);
    shm_matmul(SHM_F32, a.data(), b.data(), out.data(), 1, m, k, n, 0, 0);
    const std::vector<float> want = reference(a, b, m, k, n);
    INFO("m " << m << ", k " << k << ", n " << n);
    CHECK(std::memcmp(out.data(), want.data(), out.size() * sizeof(float)) == 0);
  }
}
