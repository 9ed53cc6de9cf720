// The header of a .npy file: numpy's Python dict literal, read as numpy reads it (npy.cpp
// checks what it says against the program's type).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shm {

// What a header says. `kind` and `size` come from the descr ('<f4': kind 'f', size 4).
struct NpyHeader {
  char order = '<';  // '<' little, '>' big, '|' not applicable (1 byte)
  char kind = 0;     // f, i, u, b, c, ...
  int64_t size = 0;
  bool fortran = false;
  std::vector<int64_t> shape;
  std::string descr;
};

// Parses the header's text (padding removed); a defect ends the program with
// `WHERE: bad .npy header: ...` (or an unsupported dtype), each defect its own message.
NpyHeader parse_npy_header(const std::string &where, const std::string &text);

} // namespace shm
