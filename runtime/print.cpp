// shm_print: the fixed text format of docs/language.md "Printing" (specified precisely, with
// examples, in docs/numerics.md).
#include "half.h"
#include "ranks.h"
#include "shmap_runtime.h"
#include "util.h"

#include <cmath>
#include <cstdio>
#include <string>

using namespace shm;

namespace {

void append_float(std::string &s, double v) {
  // %.6g would print NaN as "nan" or "-nan" depending on its sign bit, which arithmetic does
  // not specify; print every NaN the same way.
  if (std::isnan(v)) {
    s += "nan";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  s += buf;
}

void append_element(std::string &s, int32_t dtype, const void *data, int64_t i) {
  switch (dtype) {
  case SHM_F32: append_float(s, (double)((const float *)data)[i]); return;
  case SHM_F64: append_float(s, ((const double *)data)[i]); return;
  case SHM_I32: s += std::to_string(((const int32_t *)data)[i]); return;
  case SHM_BOOL: s += ((const uint8_t *)data)[i] ? "true" : "false"; return;
  case SHM_I64: s += std::to_string((long long)((const int64_t *)data)[i]); return;
  // f16 / bf16: the value (exact in f32 and in double) with the same %.6g as f32 and f64
  case SHM_F16: append_float(s, (double)f16_to_f32(((const uint16_t *)data)[i])); return;
  case SHM_BF16: append_float(s, (double)bf16_to_f32(((const uint16_t *)data)[i])); return;
  }
  fatalf("print: unknown dtype code %d", (int)dtype);
}

} // namespace

extern "C" void shm_print(const char *label, int32_t dtype, int32_t rank, const int64_t *shape,
                          const void *data) {
  SHM_GUARD_BEGIN
  check_rank(rank, "print");
  if (!shm::writes_output()) return;  // every rank runs the host code; rank 0 prints
  std::string s;
  if (label && *label) {
    s += label;
    s += ": ";
  }
  s += dtype_name(dtype);
  s += '[';
  for (int32_t d = 0; d < rank; ++d) {
    if (d) s += ',';
    s += std::to_string((long long)shape[d]);
  }
  s += ']';
  const int64_t total = num_elements(rank, shape);
  if (rank == 0) {
    s += " = ";
    append_element(s, dtype, data, 0);
    s += '\n';
  } else if (total == 0) {
    // An empty array: just the brackets, "[]" for rank 1, "[[]]" for rank 2, ...
    s += '\n';
    s += std::string((size_t)rank, '[') + std::string((size_t)rank, ']') + '\n';
  } else {
    s += '\n';
    const int64_t len = shape[rank - 1];
    const int64_t rows = total / len;
    int64_t idx[kMaxRank] = {0}; // index of the current row over dimensions 0..rank-2
    for (int64_t r = 0; r < rows; ++r) {
      // A row opens one bracket per dimension whose index just restarted at 0 (plus its own),
      // and is indented so its first element lines up with the rows above, as numpy does.
      int32_t opens = 1;
      for (int32_t d = rank - 2; d >= 0 && idx[d] == 0; --d) ++opens;
      int32_t closes = 1;
      for (int32_t d = rank - 2; d >= 0 && idx[d] == shape[d] - 1; --d) ++closes;
      s.append((size_t)(rank - opens), ' ');
      s.append((size_t)opens, '[');
      for (int64_t j = 0; j < len; ++j) {
        if (j) s += ", ";
        append_element(s, dtype, data, r * len + j);
      }
      s.append((size_t)closes, ']');
      if (r + 1 < rows) s += ',';
      s += '\n';
      for (int32_t d = rank - 2; d >= 0; --d) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
  }
  std::fwrite(s.data(), 1, s.size(), stdout);
  SHM_GUARD_END("print")
}
