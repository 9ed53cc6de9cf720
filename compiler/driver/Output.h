// Where a compile writes its result. The path is checked before any work (a missing folder, a
// directory, the input file itself), and a failed write is reported instead of being lost.
#pragma once
#include "driver/Pipeline.h"
#include "source/Diagnostics.h"

#include <string>

namespace shmapc {

// The file the compile will write: -o, else a.o / a.out for obj / exe; "" for standard output
// (text emits without -o or with -o -) and for `check`, which writes no file.
std::string outputPath(const CompileOptions &opts);

// Reports [cannot-write] and throws CompileError if `path` cannot become the output.
void requireWritableOutput(const std::string &path, const std::string &input, Diagnostics &diags);

// Writes a text emit to `path` ("" = standard output); a failure is a [cannot-write] error.
void writeTextOutput(const std::string &path, const std::string &text, Diagnostics &diags);

} // namespace shmapc
