// Linking an object file with the runtime into an executable, and running programs.
#pragma once
#include <string>
#include <vector>

namespace shmapc {

// Runs `argv` (argv[0] looked up on PATH) as Interrupt.h's linker: a signal to shmapc ends it
// and everything it started. Its $TMPDIR is `tmpdir` (one of shmapc's temporary folders) when
// given. Returns its exit status, or -1 if it could not be started or was killed (then `error`
// says why).
int runProcess(const std::vector<std::string> &argv, std::string &error, const std::string &tmpdir = "");

// Links `object` with the runtime into the executable `output`: the one-process runtime, or
// with `mpi` the MPI one (runtime/ranks.h). The linker's own temporaries go into `tmpdir`, a
// folder of Interrupt.h's that a signal removes. Returns false on failure.
bool linkExecutable(const std::string &object, const std::string &output, bool mpi, const std::string &tmpdir,
                    std::string &error);

} // namespace shmapc
