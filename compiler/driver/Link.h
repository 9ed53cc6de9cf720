// Linking an object file with the runtime into an executable, and running programs.
#pragma once
#include <string>
#include <vector>

namespace shmapc {

// Runs `argv` (argv[0] looked up on PATH); returns its exit status, or -1 if it could not
// be started or was killed (then `error` says why).
int runProcess(const std::vector<std::string> &argv, std::string &error);

// Links `object` with the runtime into the executable `output`. Returns false on failure.
bool linkExecutable(const std::string &object, const std::string &output, std::string &error);

} // namespace shmapc
