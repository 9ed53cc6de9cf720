// numpy .npy/.npz internals shared with the unit tests (private; not part of the ABI).
#ifndef SHMAP_RUNTIME_NPY_H
#define SHMAP_RUNTIME_NPY_H
#include <cstdint>
#include <string>

namespace shm {

// Test hook: when set, called for every read the .npy/.npz readers make from a file, with the
// byte offset in the file and the length (tests/unit/test_npy.cpp checks that a block load
// reads the header and its block's bytes only). Set it only while no device thread runs.
extern void (*npy_read_observer)(int64_t offset, int64_t bytes);

// The archive size limit of savez: shmapc writes .npz archives without zip64 records, so every
// member and every offset in the archive must stay below 2^32 - 1 bytes (docs/limits.md).
constexpr int64_t kMaxNpzBytes = 0xFFFFFFFELL;

// numpy's savez (a stored archive, written atomically), by this process alone: shm_save_npz
// has rank 0 call it.
void write_npz(const char *path, int32_t n, const char *const *keys, const int32_t *dtypes, const int32_t *ranks,
               const int64_t *shapes, const void *const *data);
// numpy's name of a dtype code ("float32"; "?" for bf16, which .npy cannot hold).
const char *numpyNameOf(int32_t dtype);
// `bytes` as the file `path`, atomically (a temporary file renamed over it).
void write_file_atomically(const char *path, const std::string &bytes);

} // namespace shm
#endif
