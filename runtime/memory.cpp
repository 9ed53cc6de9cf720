// Buffers, copies, fatal errors and the small helpers of util.h.
#include "shmap_runtime.h"
#include "half.h"
#include "ranks.h"
#include "sync.h"
#include "util.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sys/mman.h>
#include <unordered_map>
#include <vector>

// ---- buffers: a cache of large blocks ------------------------------------------------------
// A training loop allocates the same large buffers every step. Handed back to glibc they are
// unmapped (above its mmap threshold, or trimmed from a device thread's arena) and every page
// faults again on the next step, so blocks of 256 KiB and more are kept, by size, and handed
// out again: after the first step a loop maps no new memory. They are mmap'd, apart from
// glibc's heap: among the libraries' allocations there (oneDNN's packing buffers) they made
// the heap fragment and touch new pages for several steps. The cache keeps at most
// kCacheLimit bytes (blocks beyond it are unmapped); smaller blocks go straight to glibc,
// whose bins already reuse them. ASan builds skip the cache so that it still sees every
// use after free. Blocks of kHugeMin and more are offered to the kernel for transparent huge
// pages (madvise; used where the system's setting is "madvise" or "always"): a 16 MiB
// array's element-wise loop and the single-copy transfer between MPI ranks walk 8 pages
// instead of 4096 (bench/mpi's all_gather of 2^22 f32 on 2 ranks: 1.2x hand-written MPI's
// time before, 0.6-1.0x after). The first touch of such a block costs more (the kernel may
// compact memory to find 2 MiB pages).
namespace shm {

thread_local HostMemory *t_host_memory = nullptr;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheOn = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kCacheOn = false;
#else
constexpr bool kCacheOn = true;
#endif
#else
constexpr bool kCacheOn = true;
#endif

constexpr size_t kHeader = 64;              // keeps the block 64-byte aligned; holds its size
constexpr size_t kPageHeader = 4096;        // mapped blocks: the data starts a page in
constexpr size_t kCacheMin = 256 << 10;
constexpr size_t kCacheLimit = size_t(1) << 30;
constexpr size_t kHugeMin = size_t(4) << 20;

struct BlockCache {
  std::mutex m;
  std::unordered_map<size_t, std::vector<void *>> free;  // size -> blocks (header addresses)
  size_t cached = 0;
};

// Blocks of this size (rounded as buffer_cache_take rounds) are mmap'd and cached.
bool cacheable(size_t size) { return kCacheOn && size >= kCacheMin; }

BlockCache &cache() {
  static BlockCache *c = new BlockCache;  // leaked: device threads may free during exit()
  return *c;
}

} // namespace

void *buffer_cache_take(size_t bytes) {
  // Round up: aligned_alloc wants a multiple of the alignment; never ask for 0 bytes. Cached
  // sizes are whole pages, so near sizes share blocks.
  size_t size = bytes < kCacheMin ? (bytes + 63) / 64 * 64 : (bytes + 4095) / 4096 * 4096;
  if (size == 0) size = 64;
  if (cacheable(size)) {
    BlockCache &c = cache();
    std::lock_guard<std::mutex> lk(c.m);
    auto it = c.free.find(size);
    if (it != c.free.end() && !it->second.empty()) {
      char *block = static_cast<char *>(it->second.back());
      it->second.pop_back();
      c.cached -= size;
      return block + kHeader;
    }
  }
  if (size > SIZE_MAX - kHeader) shm_fatal("out of memory");
  char *block;
  if (cacheable(size)) {
    // Mapped apart from glibc's heap, where it would fragment what the libraries allocate.
    void *m = mmap(nullptr, size + kPageHeader, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) shm_fatal("out of memory");
    if (size >= kHugeMin) madvise(m, size + kPageHeader, MADV_HUGEPAGE);
    block = static_cast<char *>(m) + kPageHeader - kHeader;
  } else {
    block = static_cast<char *>(std::aligned_alloc(64, size + kHeader));
  }
  if (!block) shm_fatal("out of memory");
  std::memcpy(block, &size, sizeof size);
  return block + kHeader;
}

void buffer_cache_give(void *p) {
  if (!p) return;
  char *block = static_cast<char *>(p) - kHeader;
  size_t size;
  std::memcpy(&size, block, sizeof size);
  if (!cacheable(size)) {
    std::free(block);
    return;
  }
  {
    BlockCache &c = cache();
    std::lock_guard<std::mutex> lk(c.m);
    if (c.cached + size <= kCacheLimit) {
      c.free[size].push_back(block);
      c.cached += size;
      return;
    }
  }
  munmap(block + kHeader - kPageHeader, size + kPageHeader);
}

} // namespace shm

extern "C" {

void shm_fatal(const char *msg) {
  // On a device thread of a run this process holds, the run stops first: the other devices
  // park, and the thread that started them reports and exits (sync.h), so exit() frees
  // nothing that a device still reads.
  if (shm::fail_on_device_thread(msg)) return;  // (not reached: it stops this thread)
  // Host code, or under MPI: several device threads may fail at once; exit() must run only once (calling it
  // concurrently is undefined), so the first caller takes this lock and never releases it:
  // later callers block until the process is gone. (A test's ranks_abort_hook may throw
  // instead of exiting: the lock is then released.)
  static std::mutex once;
  std::unique_lock<std::mutex> lock(once);
  std::fflush(stdout);
  std::fprintf(stderr, "shmap runtime error: %s%s\n", shm::rank_prefix(), msg ? msg : "(null)");
  std::fflush(stderr);
  shm::ranks_abort(2);  // exit(2); under MPI the whole job, so no rank waits for this one
}

void *shm_alloc(int64_t bytes) {
  if (bytes < 0) shm_fatal("negative allocation size");
  if (shm::HostMemory *h = shm::t_host_memory) {  // (a pipeline group's thread, --stats=pipeline)
    ++h->allocations;
    h->live += bytes;
    if (h->live > h->peak) h->peak = h->live;
  }
  void *p = shm::buffer_cache_take((size_t)bytes);
  if (p) std::memcpy(static_cast<char *>(p) - 16, &bytes, sizeof bytes);  // (in the header's spare bytes: shm_free reads it)
  return p;
}

void shm_free(void *p) {
  if (shm::HostMemory *h = shm::t_host_memory; h && p) {
    int64_t bytes = 0;
    std::memcpy(&bytes, static_cast<char *>(p) - 16, sizeof bytes);
    h->live -= bytes;
  }
  shm::buffer_cache_give(p);
}

void shm_copy(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, (size_t)bytes);
}

} // extern "C"

namespace shm {

void fatalf(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  shm_fatal(buf);
  std::abort(); // not reached: shm_fatal exits
}

int64_t dtype_size(int32_t dtype) {
  switch (dtype) {
  case SHM_F32: return 4;
  case SHM_F64: return 8;
  case SHM_I32: return 4;
  case SHM_BOOL: return 1;
  case SHM_I64: return 8;
  case SHM_F16: return 2;
  case SHM_BF16: return 2;
  }
  fatalf("unknown dtype code %d", (int)dtype);
}

const char *dtype_name(int32_t dtype) {
  switch (dtype) {
  case SHM_F32: return "f32";
  case SHM_F64: return "f64";
  case SHM_I32: return "i32";
  case SHM_BOOL: return "bool";
  case SHM_I64: return "i64";
  case SHM_F16: return "f16";
  case SHM_BF16: return "bf16";
  }
  fatalf("unknown dtype code %d", (int)dtype);
}

void widen_half(int32_t dtype, const void *in, float *out, int64_t n) {
  const uint16_t *h = static_cast<const uint16_t *>(in);
  if (dtype == SHM_F16)
    for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(h[i]);
  else if (dtype == SHM_BF16)
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(h[i]);
  else
    fatalf("widen_half: dtype %s is not f16 or bf16", dtype_name(dtype));
}

void narrow_half(int32_t dtype, const float *in, void *out, int64_t n) {
  uint16_t *h = static_cast<uint16_t *>(out);
  if (dtype == SHM_F16)
    for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(in[i]);
  else if (dtype == SHM_BF16)
    for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(in[i]);
  else
    fatalf("narrow_half: dtype %s is not f16 or bf16", dtype_name(dtype));
}

void check_rank(int32_t rank, const char *what) {
  if (rank < 0 || rank > kMaxRank)
    fatalf("%s: rank %d is out of the supported range 0..%d", what, (int)rank, kMaxRank);
}

void check_shape(int32_t rank, const int64_t *shape, const char *what) {
  check_rank(rank, what);
  for (int32_t d = 0; d < rank; ++d)
    if (shape[d] < 0) fatalf("%s: negative dimension %lld", what, (long long)shape[d]);
}

int64_t num_elements(int32_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (int32_t d = 0; d < rank; ++d) {
    if (shape[d] < 0) fatalf("negative dimension %lld", (long long)shape[d]);
    n *= shape[d];
  }
  return n;
}

void row_major_strides(int32_t rank, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
}

namespace {
// One innermost row: n elements with the given strides.
template <typename T>
inline void copy_row(int64_t n, const T *src, int64_t ss, T *dst, int64_t ds) {
  if (ss == 1 && ds == 1) {
    std::memcpy(dst, src, (size_t)n * sizeof(T));
  } else if (ss == 0) {
    T v = *src;
    for (int64_t i = 0; i < n; ++i) dst[i * ds] = v;
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * ds] = src[i * ss];
  }
}

template <typename T>
void copy_strided_t(int32_t rank, const int64_t *shape, const T *src, const int64_t *ss, T *dst,
                    const int64_t *ds) {
  if (rank == 0) {
    *dst = *src;
    return;
  }
  for (int32_t d = 0; d < rank; ++d)
    if (shape[d] == 0) return;
  // Odometer over all dimensions but the last; keeps source and destination offsets
  // incrementally so the inner loop does no index arithmetic.
  int64_t idx[kMaxRank] = {0};
  int64_t so = 0, dof = 0;
  const int32_t last = rank - 1;
  for (;;) {
    copy_row<T>(shape[last], src + so, ss[last], dst + dof, ds[last]);
    int32_t d = last - 1;
    for (; d >= 0; --d) {
      so += ss[d];
      dof += ds[d];
      if (++idx[d] < shape[d]) break;
      so -= ss[d] * shape[d];
      dof -= ds[d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}
} // namespace

void copy_strided(int64_t esize, int32_t rank, const int64_t *shape, const void *src,
                  const int64_t *src_strides, void *dst, const int64_t *dst_strides) {
  check_rank(rank, "copy");
  switch (esize) {
  case 1:
    copy_strided_t(rank, shape, (const uint8_t *)src, src_strides, (uint8_t *)dst, dst_strides);
    return;
  case 2:
    copy_strided_t(rank, shape, (const uint16_t *)src, src_strides, (uint16_t *)dst,
                   dst_strides);
    return;
  case 4:
    copy_strided_t(rank, shape, (const uint32_t *)src, src_strides, (uint32_t *)dst,
                   dst_strides);
    return;
  case 8:
    copy_strided_t(rank, shape, (const uint64_t *)src, src_strides, (uint64_t *)dst,
                   dst_strides);
    return;
  }
  fatalf("copy_strided: unsupported element size %lld", (long long)esize);
}

} // namespace shm
