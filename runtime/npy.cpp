// numpy's .npy files (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
// load checks the file against the program's static type and fails naming the file and what
// differs; save writes version 1 through a temporary file and a rename, so a crash never
// leaves a half-written file under the final name.
#include "util.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace shm {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxHeaderBytes = 1 << 20;  // numpy writes a few hundred; refuse absurd ones

// What a header says. `kind` and `size` come from the descr ('<f4': kind 'f', size 4).
struct Header {
  char order = '<';  // '<' little, '>' big, '|' not applicable (1 byte)
  char kind = 0;     // f, i, u, b, c, ...
  int64_t size = 0;
  bool fortran = false;
  std::vector<int64_t> shape;
  std::string descr;
};

[[noreturn]] void bad(const char *path, const std::string &what) {
  fatalf("%s: %s", path, what.c_str());
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The numpy name of a descr, for messages.
std::string numpyName(const Header &h) {
  std::string bits = std::to_string(h.size * 8);
  switch (h.kind) {
  case 'f': return "float" + bits;
  case 'i': return "int" + bits;
  case 'u': return "uint" + bits;
  case 'b': return "bool";
  case 'c': return "complex" + bits;
  default: return "'" + h.descr + "'";
  }
}

const char *languageName(int32_t dtype) {
  switch (dtype) {
  case SHM_F32: return "f32";
  case SHM_F64: return "f64";
  case SHM_I32: return "i32";
  case SHM_BOOL: return "bool";
  case SHM_I64: return "i64";
  case SHM_F16: return "f16";
  case SHM_BF16: return "bf16";
  }
  return "?";
}

const char *numpyNameOf(int32_t dtype) {
  switch (dtype) {
  case SHM_F32: return "float32";
  case SHM_F64: return "float64";
  case SHM_I32: return "int32";
  case SHM_BOOL: return "bool";
  case SHM_I64: return "int64";
  case SHM_F16: return "float16";
  }
  return "?";
}

// The descr numpy writes for a dtype (little-endian).
const char *descrOf(int32_t dtype) {
  switch (dtype) {
  case SHM_F32: return "<f4";
  case SHM_F64: return "<f8";
  case SHM_I32: return "<i4";
  case SHM_BOOL: return "|b1";
  case SHM_I64: return "<i8";
  case SHM_F16: return "<f2";
  }
  fatalf("save: unknown dtype code %d", (int)dtype);
}

bool matches(const Header &h, int32_t dtype) {
  switch (dtype) {
  case SHM_F32: return h.kind == 'f' && h.size == 4;
  case SHM_F64: return h.kind == 'f' && h.size == 8;
  case SHM_I32: return h.kind == 'i' && h.size == 4;
  case SHM_BOOL: return h.kind == 'b' && h.size == 1;
  case SHM_I64: return h.kind == 'i' && h.size == 8;
  case SHM_F16: return h.kind == 'f' && h.size == 2;
  }
  return false;
}

// A small reader of the Python dict literal numpy writes: {'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), }. Keys may come in any order; anything else is refused.
class HeaderParser {
public:
  HeaderParser(const char *path, const std::string &text) : path_(path), s_(text) {}

  Header parse() {
    Header h;
    bool descr = false, order = false, shape = false;
    expect('{');
    while (!peekIs('}')) {
      std::string key = quoted();
      expect(':');
      if (key == "descr") {
        if (peekIs('[')) bad(path_, "structured dtypes (a list descr) are not supported");
        h.descr = quoted();
        descr = true;
      } else if (key == "fortran_order") {
        h.fortran = boolean();
        order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        shape = true;
      } else {
        bad(path_, "bad .npy header: unknown key '" + key + "'");
      }
      if (!peekIs('}')) expect(',');
    }
    expect('}');
    if (!descr || !order || !shape) bad(path_, "bad .npy header: it needs descr, fortran_order and shape");
    parseDescr(h);
    return h;
  }

private:
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool peekIs(char c) {
    skipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peekIs(c)) bad(path_, std::string("bad .npy header: expected '") + c + "' in " + s_);
    ++pos_;
  }
  std::string quoted() {
    skipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      bad(path_, "bad .npy header: expected a quoted string in " + s_);
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == std::string::npos) bad(path_, "bad .npy header: unterminated string");
    std::string out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skipSpace();
    if (s_.compare(pos_, 4, "True") == 0) return pos_ += 4, true;
    if (s_.compare(pos_, 5, "False") == 0) return pos_ += 5, false;
    bad(path_, "bad .npy header: fortran_order must be True or False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> out;
    expect('(');
    while (!peekIs(')')) {
      skipSpace();
      int64_t v = 0;
      size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[pos_] - '0', &v))
          bad(path_, "bad .npy header: a dimension overflows");
        ++pos_;
      }
      if (pos_ == start) bad(path_, "bad .npy header: expected a dimension in " + s_);
      out.push_back(v);
      if (out.size() > (size_t)kMaxRank) bad(path_, "the array has more than 16 dimensions");
      if (!peekIs(')')) expect(',');
    }
    expect(')');
    return out;
  }
  void parseDescr(Header &h) {
    const std::string &d = h.descr;
    if (d.size() < 3 || !std::strchr("<>|=", d[0]))
      bad(path_, "unsupported dtype '" + d + "' (shmapc reads float32, float64, int32 and bool)");
    h.order = d[0] == '=' ? '<' : d[0];  // '=' is native: little-endian here
    h.kind = d[1];
    h.size = 0;
    for (size_t i = 2; i < d.size(); ++i) {
      if (d[i] < '0' || d[i] > '9' || h.size > 64)
        bad(path_, "unsupported dtype '" + d + "' (shmapc reads float32, float64, int32 and bool)");
      h.size = h.size * 10 + (d[i] - '0');
    }
    if (h.size == 0) bad(path_, "unsupported dtype '" + d + "'");
  }

  const char *path_;
  const std::string &s_;
  size_t pos_ = 0;
};

uint32_t littleEndian(const unsigned char *p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void byteswap(void *data, int64_t n, int64_t esize) {
  unsigned char *p = static_cast<unsigned char *>(data);
  for (int64_t i = 0; i < n; ++i, p += esize)
    for (int64_t a = 0, b = esize - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
}

struct File {
  FILE *f = nullptr;
  ~File() {
    if (f) std::fclose(f);
  }
};

} // namespace

} // namespace shm

using namespace shm;

extern "C" void shm_load_npy(const char *path, int32_t dtype, int32_t rank, const int64_t *shape,
                             void *out) {
  SHM_GUARD_BEGIN
  struct stat st;
  if (stat(path, &st) != 0) bad(path, std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) bad(path, "not a regular file");
  File file;
  file.f = std::fopen(path, "rb");
  if (!file.f) bad(path, std::string("cannot open: ") + std::strerror(errno));

  unsigned char pre[12];
  size_t got = std::fread(pre, 1, 10, file.f);
  if (got < 10 || std::memcmp(pre, kMagic, 6) != 0)
    bad(path, "not a .npy file (it does not start with \\x93NUMPY)");
  int major = pre[6];
  if (major < 1 || major > 3)
    bad(path, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(pre[7]));
  int64_t headerLen, prefix = 10;
  if (major == 1) {
    headerLen = littleEndian(pre + 8, 2);
  } else {
    if (std::fread(pre + 10, 1, 2, file.f) != 2) bad(path, "truncated .npy header");
    headerLen = littleEndian(pre + 8, 4);
    prefix = 12;
  }
  if (headerLen > kMaxHeaderBytes || prefix + headerLen > st.st_size)
    bad(path, "truncated or corrupt .npy header (it claims " + std::to_string(headerLen) + " bytes)");
  std::string text((size_t)headerLen, '\0');
  if (std::fread(&text[0], 1, (size_t)headerLen, file.f) != (size_t)headerLen)
    bad(path, "truncated .npy header");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) text.pop_back();
  Header h = HeaderParser(path, text).parse();

  std::vector<int64_t> want(shape, shape + rank);
  std::string type = std::string(languageName(dtype)) + "[";
  for (int32_t d = 0; d < rank; ++d) {
    if (d) type += ',';
    type += std::to_string(shape[d]);
  }
  type += "]";
  if (!matches(h, dtype))
    bad(path, "the file holds " + numpyName(h) + " but the program loads " + type +
                  "; convert it in numpy (a.astype(np." + numpyNameOf(dtype) + ")) or change the type");
  if (h.shape != want)
    bad(path, "the file holds an array of shape " + shapeText(h.shape) + " but the program loads " +
                  type + " (shape " + shapeText(want) + ")");

  int64_t n = num_elements(rank, shape), esize = dtype_size(dtype), bytes = n * esize;
  int64_t have = st.st_size - prefix - headerLen;
  if (have < bytes)
    bad(path, "truncated: the data should be " + std::to_string(bytes) + " bytes but the file holds " +
                  std::to_string(have));
  if (have > bytes)
    bad(path, "the file holds " + std::to_string(have - bytes) + " bytes after the array's data");

  std::vector<unsigned char> staging;
  void *dst = out;
  if (h.fortran && rank > 1) {
    staging.resize((size_t)bytes);
    dst = staging.data();
  }
  if (bytes > 0 && std::fread(dst, 1, (size_t)bytes, file.f) != (size_t)bytes)
    bad(path, std::string("read error: ") + std::strerror(errno));
  if (h.order == '>' && esize > 1) byteswap(dst, n, esize);
  if (h.fortran && rank > 1) {  // column-major in the file: element (i0, i1, ...) at sum i_d * prod_{e<d} s_e
    int64_t src_str[kMaxRank], dst_str[kMaxRank];
    row_major_strides(rank, shape, dst_str);
    int64_t s = 1;
    for (int32_t d = 0; d < rank; ++d) {
      src_str[d] = s;
      s *= shape[d];
    }
    copy_strided(esize, rank, shape, staging.data(), src_str, out, dst_str);
  }
  if (dtype == SHM_BOOL) {  // the language's bools are 0 or 1
    unsigned char *p = static_cast<unsigned char *>(out);
    for (int64_t i = 0; i < n; ++i) p[i] = p[i] != 0;
  }
  SHM_GUARD_END("load")
}

extern "C" void shm_save_npy(const char *path, int32_t dtype, int32_t rank, const int64_t *shape,
                             const void *data) {
  SHM_GUARD_BEGIN
  check_rank(rank, "save");
  std::vector<int64_t> dims(shape, shape + rank);
  std::string header = std::string("{'descr': '") + descrOf(dtype) +
                       "', 'fortran_order': False, 'shape': " + shapeText(dims) + ", }";
  // Version 1: magic, 2 version bytes, a 2-byte length; the header padded with spaces and
  // ended by a newline so that the data starts at a multiple of 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  unsigned char pre[10];
  std::memcpy(pre, kMagic, 6);
  pre[6] = 1;
  pre[7] = 0;
  pre[8] = (unsigned char)(header.size() & 0xff);
  pre[9] = (unsigned char)(header.size() >> 8);

  std::string tmp = std::string(path) + ".tmp-" + std::to_string((long)getpid());
  int64_t bytes = num_elements(rank, shape) * dtype_size(dtype);
  File file;
  file.f = std::fopen(tmp.c_str(), "wb");
  if (!file.f) bad(path, std::string("cannot write: ") + std::strerror(errno));
  bool ok = std::fwrite(pre, 1, 10, file.f) == 10 &&
            std::fwrite(header.data(), 1, header.size(), file.f) == header.size() &&
            (bytes == 0 || std::fwrite(data, 1, (size_t)bytes, file.f) == (size_t)bytes) &&
            std::fflush(file.f) == 0 && fsync(fileno(file.f)) == 0;
  int err = errno;
  ok = std::fclose(file.f) == 0 && ok;
  file.f = nullptr;
  if (!ok || std::rename(tmp.c_str(), path) != 0) {
    if (ok) err = errno;
    std::remove(tmp.c_str());
    bad(path, std::string("cannot write: ") + std::strerror(err));
  }
  SHM_GUARD_END("save")
}
