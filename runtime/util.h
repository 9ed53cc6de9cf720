// Small helpers shared by the runtime's source files (private; not part of the ABI).
#ifndef SHMAP_RUNTIME_UTIL_H
#define SHMAP_RUNTIME_UTIL_H
#include "shmap_limits.h"
#include "shmap_runtime.h"

#include <cstdint>
#include <exception>
#include <string>

namespace shm {

// Formats like printf and calls shm_fatal (prints `shmap runtime error: ...`, exits 2).
[[noreturn]] void fatalf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// shm_alloc / shm_free (memory.cpp): 64-byte aligned buffers; blocks of 256 KiB and more are
// kept for reuse instead of being returned to the system.
void *buffer_cache_take(size_t bytes);
// A pipeline group's host memory (--stats=pipeline): what shm_alloc handed its thread, less
// what shm_free took back there; set on a stage program's thread while it runs.
struct HostMemory {
  int64_t allocations = 0, live = 0, peak = 0;
};
extern thread_local HostMemory *t_host_memory;
void buffer_cache_give(void *p);

// Bytes per element of a dtype code; shm_fatal on an unknown code.
int64_t dtype_size(int32_t dtype);
const char *dtype_name(int32_t dtype);

// f16 and bf16: 16-bit storage types computed on in f32 (runtime/abi/half.h). widen_half converts
// n elements of such a dtype to f32 (exactly); narrow_half rounds n f32 values to it.
inline bool is_half(int32_t dtype) { return dtype == SHM_F16 || dtype == SHM_BF16; }
void widen_half(int32_t dtype, const void *in, float *out, int64_t n);
void narrow_half(int32_t dtype, const float *in, void *out, int64_t n);

// Product of shape[0..rank); shm_fatal on a negative dimension.
int64_t num_elements(int32_t rank, const int64_t *shape);

// Row-major strides (in elements) of a dense array of the given shape.
void row_major_strides(int32_t rank, const int64_t *shape, int64_t *strides);

// The runtime supports arrays of rank up to this bound (a fixed bound keeps the hot loops free of
// heap allocation); shm_fatal beyond it.
constexpr int kMaxRank = SHM_MAX_RANK;
void check_rank(int32_t rank, const char *what);
// check_rank, and shm_fatal on a negative dimension.
void check_shape(int32_t rank, const int64_t *shape, const char *what);

// Copies a strided block of `shape` (rank may be 0: one element) from src to dst. Strides are in
// elements and may be 0 (broadcast reads). The innermost loop is specialised for the common
// case of contiguous rows and for element sizes 1, 2, 4 and 8.
void copy_strided(int64_t esize, int32_t rank, const int64_t *shape, const void *src,
                  const int64_t *src_strides, void *dst, const int64_t *dst_strides);

// The start-up check of the CPU (cpu_check.cpp), both honouring SHMAP_PRETEND_CPU_LACKS: why
// a program compiled for `cpu` (--target-cpu=`target`) whose code uses the comma-separated
// instruction-set `features` (LLVM's names, cpu_features.h) cannot run on this CPU, or "" if
// it can; and whether this CPU has one feature (1 or 0; -1 for a name not in cpu_features.h).
std::string cpu_check_problem(const char *target, const char *cpu, const char *features);
int cpu_has(const char *feature);

// Why a SHMAP_* environment variable's value is not one it takes, or "" (env.cpp): the first
// variable with a bad value, or the one named.
std::string environment_error();
std::string environment_error(const char *name);
// SHMAP_COLLECTIVE_TIMEOUT's seconds (300 when unset or empty; -1 for a value
// environment_error refuses).
double collective_timeout_setting();

} // namespace shm

// The C ABI must never let a C++ exception escape (callers are emitted C-like code). Every
// extern "C" entry point wraps its body in SHM_GUARD_BEGIN / SHM_GUARD_END(name), which turns
// an exception (e.g. std::bad_alloc, std::system_error from std::thread) into shm_fatal.
#define SHM_GUARD_BEGIN try {
#define SHM_GUARD_END(name)                                                                  \
  }                                                                                          \
  catch (const std::exception &e) {                                                          \
    shm::fatalf("%s: %s", name, e.what());                                                   \
  }                                                                                          \
  catch (...) {                                                                              \
    shm::fatalf("%s: unknown exception", name);                                              \
  }

#endif
