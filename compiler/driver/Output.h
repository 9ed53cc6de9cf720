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

// Writes an emit to `path` ("" = standard output) through safe_write.h: a regular file is
// replaced by a renamed temporary file, a device or FIFO written in place, a symbolic link
// written through; a failure is a [cannot-write] error. `executable`: mode 0777 less the umask.
// A signal meanwhile removes the temporary file and leaves `path` as it was (Interrupt.h).
void writeOutput(const std::string &path, const std::string &bytes, bool executable, Diagnostics &diags);

} // namespace shmapc
