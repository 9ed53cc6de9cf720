// libFuzzer target: the runtime's loaders (runtime/npy.cpp) on untrusted .npy files and .npz
// archives. Built only with -DSHMAPC_FUZZ=ON (clang); run by tools/fuzz.sh after the front end.
//
// A bad file must end in a clear `shmap runtime error` (shm_fatal); here ranks_abort_hook turns
// that exit into an exception, so the fuzzer goes on. Anything else aborts and libFuzzer keeps
// the input: a sanitizer report (a read out of bounds, an overflow), a hang, an allocation
// beyond -rss_limit_mb, or a load that succeeds with bools other than 0 / 1.
//
// Input: a request, then the file's bytes.
//   byte 0       what: (byte % 3) = 0 a .npy file, 1 the member "a" of an .npz archive, 2 a
//                block of a .npy file; (byte / 3) % 7 the dtype code (SHM_F32 ...)
//   byte 1       rank: byte % 4
//   next rank    the global shape, a byte per dimension
//   (block only) rank bytes of block start, then rank bytes of block shape (skipped unless
//                the block lies inside the shape, as the compiler guarantees)
// The request is the type the program declares; the fuzzer learns the comparisons with the
// header from the seeds (tests/fuzz/make_load_seeds.py writes valid files of every kind).
#include "ranks.h"
#include "shmap_runtime.h"
#include "sync.h"
#include "util.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace {

struct Refused {};  // a clear runtime error: what a bad file should give

[[noreturn]] void throwInsteadOfExit(int) { throw Refused{}; }

int memfd = -1;
std::string path;  // /proc/self/fd/N: the loaders open it like any regular file

bool setUp() {
  shm::ranks_abort_hook = throwInsteadOfExit;
  memfd = memfd_create("fuzz.npy", 0);
  if (memfd < 0) return false;
  path = "/proc/self/fd/" + std::to_string(memfd);
  return true;
}

bool writeFile(const uint8_t *data, size_t size) {
  if (ftruncate(memfd, 0) != 0) return false;
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(memfd, data + done, size - done, (off_t)done);
    if (n <= 0) return false;
    done += (size_t)n;
  }
  return true;
}

} // namespace

// shm_fatal (memory.cpp) first asks the device threads' stop protocol (sync.cpp, which needs
// the whole runtime) whether it runs on a device thread. The loaders run here on the fuzzer's
// own thread, host code with no device running, so the answer is no: shm_fatal goes on to
// ranks_abort_hook, which throws Refused.
namespace shm {
bool fail_on_device_thread(const char *) { return false; }
} // namespace shm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const bool ready = setUp();
  if (!ready) std::abort();
  if (size < 2) return 0;
  const int what = data[0] % 3, dtype = (data[0] / 3) % 7, rank = data[1] % 4;
  size_t at = 2;
  const size_t need = (size_t)rank * (what == 2 ? 3 : 1);
  if (size < at + need) return 0;
  int64_t shape[3], start[3] = {0, 0, 0}, block[3];
  for (int d = 0; d < rank; ++d) shape[d] = data[at++];
  for (int d = 0; d < rank; ++d) block[d] = shape[d];
  if (what == 2) {
    for (int d = 0; d < rank; ++d) start[d] = data[at++];
    for (int d = 0; d < rank; ++d) block[d] = data[at++];
    for (int d = 0; d < rank; ++d)
      if (start[d] + block[d] > shape[d]) return 0;
  }
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= block[d];
  if (!writeFile(data + at, size - at)) std::abort();
  std::vector<unsigned char> out((size_t)(n * shm::dtype_size(dtype)) + 1);
  try {
    if (what == 0) shm_load_npy(path.c_str(), dtype, rank, shape, out.data());
    if (what == 1) shm_load_npz(path.c_str(), "a", dtype, rank, shape, out.data());
    if (what == 2) shm_load_npy_block(path.c_str(), nullptr, dtype, rank, shape, start, block, out.data());
  } catch (const Refused &) {
    return 0;
  }
  if (dtype == SHM_BOOL)
    for (int64_t i = 0; i < n; ++i)
      if (out[(size_t)i] > 1) {
        std::fprintf(stderr, "fuzz_load: a loaded bool is %d\n", out[(size_t)i]);
        std::abort();
      }
  return 0;
}
