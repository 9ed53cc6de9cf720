#include "driver/Link.h"

#include "driver/Interrupt.h"

#include <cstdlib>
#include <sstream>
#include <sys/wait.h>

namespace shmapc {

int runProcess(const std::vector<std::string> &argv, std::string &error, const std::string &tmpdir) {
  int status = 0;
  if (!interrupt::runChild(interrupt::Child::Linker, argv, status, error, tmpdir)) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  error = "'" + argv[0] + "' was killed by signal " + std::to_string(WTERMSIG(status));
  return -1;
}

bool linkExecutable(const std::string &object, const std::string &output, bool mpi, const std::string &tmpdir,
                    std::string &error) {
  if (mpi && !*SHMAPC_RUNTIME_MPI_LIB) {
    error = "this shmapc was built without MPI (Open MPI's libopenmpi-dev, or a sanitizer build): no --mpi";
    return false;
  }
  // g++ drives the link because the runtime is C++ (libstdc++, threads).
  // zlib: the runtime's .npz reader and writer (CRC-32, inflate); oneDNN: large f32 matmuls;
  // jemalloc (not in sanitizer builds): malloc for the program and its libraries.
  // SHMAPC_RUNTIME_LIB: another build of the runtime (bench/trace/run.py's, without hooks).
  const char *runtime = std::getenv("SHMAPC_RUNTIME_LIB");
  if (!runtime || !*runtime || mpi) runtime = mpi ? SHMAPC_RUNTIME_MPI_LIB : SHMAPC_RUNTIME_LIB;
  std::vector<std::string> argv = {"g++", object, runtime, SHMAPC_BLAS_LIB,
                                   SHMAPC_DNNL_LIB, SHMAPC_ZLIB_LIB, "-lgomp", "-lpthread", "-lmvec", "-lm", "-o", output};
  if (mpi) {
    std::istringstream libs(SHMAPC_MPI_LIBS);
    for (std::string lib; libs >> lib;) argv.insert(argv.end() - 2, lib);
  }
  if (*SHMAPC_MALLOC_LIB) argv.insert(argv.begin() + 3, SHMAPC_MALLOC_LIB);  // before the libraries that call malloc
  std::istringstream sanitize(SHMAPC_SANITIZE_FLAGS);
  for (std::string flag; sanitize >> flag;) argv.push_back(flag);
  int rc = runProcess(argv, error, tmpdir);
  if (rc == 0) return true;
  if (rc > 0) error = "the linker (g++) failed with status " + std::to_string(rc);
  return false;
}

} // namespace shmapc
