// Linking an object file with the runtime into an executable, and running programs.
#pragma once
#include <string>
#include <vector>

namespace shmapc {

// Runs `argv` (argv[0] looked up on PATH) as Interrupt.h's linker: a signal to shmapc ends it
// and everything it started. Returns its exit status, or -1 if it could not be started or was
// killed (then `error` says why).
int runProcess(const std::vector<std::string> &argv, std::string &error);

// Links `object` with the runtime into the executable `output`: the one-process runtime, or
// with `mpi` the MPI one (runtime/ranks.h). Returns false on failure.
bool linkExecutable(const std::string &object, const std::string &output, bool mpi, std::string &error);

} // namespace shmapc
