// numpy's .npy files (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html)
// and .npz archives (zip files of .npy members, as np.savez and np.savez_compressed write them).
//
// load checks the array's header against the program's static type and fails naming the file
// (and, in an archive, the key) and what differs. Every read goes through a Source: a .npy file
// or a stored archive member read in place with pread, or a deflated member inflated by zlib as
// a stream. A block load (a sharded load in a shmap body: each device its own block) reads the
// header and then only the block's contiguous runs of the C-order data; a Fortran-order file is
// the C-order array of the reversed shape, so its block is read the same way and transposed.
//
// save writes version 1 through safe_write.h (a temporary file and a rename), so a crash never leaves a
// half-written file under the final name; savez writes a stored (uncompressed) zip archive the
// same way, with zlib's CRC-32s and without zip64 records (every member and offset below 4 GiB).
#include "npy.h"
#include "npy_header.h"
#include "ranks.h"
#include "safe_write.h"

#include "device.h"
#include "util.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unordered_set>
#include <unistd.h>
#include <vector>
#include <zlib.h>

namespace shm {

void (*npy_read_observer)(int64_t offset, int64_t bytes) = nullptr;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxHeaderBytes = 1 << 20;  // numpy writes a few hundred; refuse absurd ones


// `where` is the prefix of every message: the file, and for an archive member also its key.
[[noreturn]] void bad(const std::string &where, const std::string &what) {
  fatalf("%s: %s", where.c_str(), what.c_str());
}

std::string num(int64_t v) { return std::to_string(v); }

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The numpy name of a descr, for messages.
std::string numpyName(const NpyHeader &h) {
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

} // namespace

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

namespace {

// The descr numpy writes for a dtype (little-endian).
const char *descrOf(int32_t dtype, const char *what) {
  switch (dtype) {
  case SHM_F32: return "<f4";
  case SHM_F64: return "<f8";
  case SHM_I32: return "<i4";
  case SHM_BOOL: return "|b1";
  case SHM_I64: return "<i8";
  case SHM_F16: return "<f2";
  }
  fatalf("%s: unknown dtype code %d", what, (int)dtype);
}

bool matches(const NpyHeader &h, int32_t dtype) {
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

uint32_t le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
uint32_t le32(const unsigned char *p) { return le16(p) | le16(p + 2) << 16; }
uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

void byteswap(void *data, int64_t n, int64_t esize) {
  unsigned char *p = static_cast<unsigned char *>(data);
  for (int64_t i = 0; i < n; ++i, p += esize)
    for (int64_t a = 0, b = esize - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
}

uint32_t crc32Of(uint32_t crc, const void *data, int64_t bytes) {
  const Bytef *p = static_cast<const Bytef *>(data);
  while (bytes > 0) {  // crc32_z takes a size_t; chunks keep this independent of its width
    int64_t n = std::min<int64_t>(bytes, 1 << 30);
    crc = (uint32_t)crc32_z(crc, p, (z_size_t)n);
    p += n;
    bytes -= n;
  }
  return crc;
}

// ---------------------------------------------------------------- reading

// A regular file opened for pread. The stat comes first, so a FIFO is refused before opening.
class Fd {
public:
  Fd(const std::string &where, const char *path) : where_(where) {
    struct stat st;
    if (stat(path, &st) != 0) bad(where, std::string("cannot open: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) bad(where, "not a regular file");
    fd_ = open(path, O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) bad(where, std::string("cannot open: ") + std::strerror(errno));
    if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) bad(where, "not a regular file");
    size_ = st.st_size;
  }
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;

  int64_t size() const { return size_; }

  // Exactly `len` bytes at `offset` (the callers check offsets against the size first).
  void read(int64_t offset, int64_t len, void *dst) {
    if (npy_read_observer) npy_read_observer(offset, len);
    char *p = static_cast<char *>(dst);
    while (len > 0) {
      ssize_t n = pread(fd_, p, (size_t)std::min<int64_t>(len, 1 << 30), (off_t)offset);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) bad(where_, std::string("read error: ") + std::strerror(errno));
      if (n == 0) bad(where_, "truncated: the file ended at byte " + num(offset) + " (did it change while the program ran?)");
      p += n;
      offset += n;
      len -= n;
    }
  }

  // Whether the file starts with `magic`.
  bool startsWith(const char *magic, size_t n) {
    if (size_ < (int64_t)n) return false;
    std::string got(n, '\0');
    read(0, (int64_t)n, &got[0]);
    return std::memcmp(got.data(), magic, n) == 0;
  }
  // Whether it starts like a zip file (a local header, or the end record of an empty archive).
  bool startsWithZip() {
    if (size_ < 4) return false;
    unsigned char got[4];
    read(0, 4, got);
    return got[0] == 'P' && got[1] == 'K' && ((got[2] == 3 && got[3] == 4) || (got[2] == 5 && got[3] == 6));
  }

private:
  const std::string where_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// The bytes of one .npy array: a whole file, or a member of an .npz archive. Reads come at
// increasing offsets (a deflated member can only be read forwards).
class Source {
public:
  virtual ~Source() = default;
  std::string where;             // message prefix: the file (and key)
  std::string noun = "the file"; // what holds the array, in messages
  int64_t size = 0;              // bytes of the .npy data (header included)
  virtual void read(int64_t offset, int64_t len, void *dst) = 0;
  // After the last read: a deflated member is inflated to its end and its CRC-32 checked; a
  // stored member read whole has its CRC-32 checked.
  virtual void finish() {}
};

// A .npy file, or a stored archive member, read in place.
class FileRange : public Source {
public:
  FileRange(Fd &fd, int64_t base, int64_t bytes, bool checkCrc, uint32_t crc)
      : fd_(fd), base_(base), checkCrc_(checkCrc), want_(crc) {
    size = bytes;
  }
  void read(int64_t offset, int64_t len, void *dst) override {
    fd_.read(base_ + offset, len, dst);
    if (!checkCrc_) return;
    if (offset == next_) {
      crc_ = crc32Of(crc_, dst, len);
      next_ += len;
    } else {
      sequential_ = false;  // a block: the CRC covers the whole member, so it cannot be checked
    }
  }
  void finish() override {
    if (checkCrc_ && sequential_ && next_ == size && crc_ != want_)
      bad(where, "CRC-32 mismatch: the archive says " + hex(want_) + " but the member's bytes give " + hex(crc_) +
                     " (the archive is corrupt)");
  }
  static std::string hex(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", v);
    return buf;
  }

private:
  Fd &fd_;
  int64_t base_;
  bool checkCrc_;
  uint32_t want_, crc_ = 0;
  int64_t next_ = 0;
  bool sequential_ = true;
};

// A deflated archive member (np.savez_compressed), inflated as a raw deflate stream.
class InflateRange : public Source {
public:
  InflateRange(Fd &fd, const std::string &w, int64_t base, int64_t csize, int64_t usize, uint32_t crc)
      : fd_(fd), base_(base), csize_(csize), want_(crc), in_(1 << 18) {
    where = w;
    size = usize;
    if (inflateInit2(&z_, -15) != Z_OK) bad(where, "zlib cannot start inflating");
  }
  ~InflateRange() override { inflateEnd(&z_); }

  void read(int64_t offset, int64_t len, void *dst) override {
    if (offset < pos_) bad(where, "internal error: a deflated member read backwards");
    produce(offset - pos_, nullptr);
    produce(len, static_cast<unsigned char *>(dst));
  }

  void finish() override {
    produce(size - pos_, nullptr);
    unsigned char extra;
    if (produce1(&extra))
      bad(where, "corrupt archive: the member inflates to more than the " + num(size) + " bytes its zip entry gives");
    if (crc_ != want_)
      bad(where, "CRC-32 mismatch: the archive says " + FileRange::hex(want_) + " but the inflated member gives " +
                     FileRange::hex(crc_) + " (the archive is corrupt)");
  }

private:
  // Inflates `len` bytes into dst (null: skipped, through a scratch buffer).
  void produce(int64_t len, unsigned char *dst) {
    unsigned char scratch[1 << 14];
    while (len > 0) {
      if (ended_)
        bad(where, "corrupt archive: the member inflates to " + num(pos_) + " bytes but its zip entry gives " + num(size));
      unsigned char *out = dst ? dst : scratch;
      uInt room = (uInt)std::min<int64_t>(len, dst ? (int64_t)1 << 30 : (int64_t)sizeof scratch);
      int64_t got = step(out, room);
      len -= got;
      if (dst) dst += got;
    }
  }
  // Whether one more byte comes out before the stream ends.
  bool produce1(unsigned char *b) {
    while (!ended_)
      if (step(b, 1) == 1) return true;
    return false;
  }
  // One call of inflate into out[0, room); returns the bytes produced.
  int64_t step(unsigned char *out, uInt room) {
    if (z_.avail_in == 0 && cpos_ < csize_) {
      int64_t n = std::min<int64_t>(csize_ - cpos_, (int64_t)in_.size());
      fd_.read(base_ + cpos_, n, in_.data());
      cpos_ += n;
      z_.next_in = in_.data();
      z_.avail_in = (uInt)n;
    }
    z_.next_out = out;
    z_.avail_out = room;
    int rc = inflate(&z_, Z_NO_FLUSH);
    int64_t got = room - z_.avail_out;
    crc_ = crc32Of(crc_, out, got);
    pos_ += got;
    if (rc == Z_STREAM_END) {
      ended_ = true;
    } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
      bad(where, std::string("corrupt compressed data (zlib: ") + (z_.msg ? z_.msg : "invalid deflate stream") + ")");
    } else if (rc == Z_MEM_ERROR) {
      bad(where, "out of memory while inflating");
    } else if (rc == Z_BUF_ERROR || (rc == Z_OK && got == 0 && z_.avail_in == 0)) {
      if (z_.avail_in == 0 && cpos_ >= csize_)
        bad(where, "truncated compressed data: the member's " + num(csize_) + " compressed bytes end after " + num(pos_) +
                       " of its " + num(size) + " bytes");
    } else if (rc != Z_OK) {
      bad(where, "zlib inflate failed (" + num(rc) + ")");
    }
    return got;
  }

  Fd &fd_;
  int64_t base_, csize_, cpos_ = 0, pos_ = 0;
  uint32_t want_, crc_ = 0;
  bool ended_ = false;
  std::vector<unsigned char> in_;
  z_stream z_{};
};

// ---------------------------------------------------------------- zip archives

struct Member {
  std::string name;
  uint32_t flags = 0, method = 0, crc = 0;
  uint64_t csize = 0, usize = 0, local = 0;
};

// The members an archive's central directory lists (its reliable record of sizes: numpy writes
// local headers with zip64 placeholders), zip64 end records and extra fields included.
std::vector<Member> readDirectory(Fd &fd, const std::string &where) {
  const int64_t size = fd.size();
  const std::string notZip = "not a .npz archive, or truncated: ";
  if (size < 22) bad(where, notZip + num(size) + " bytes is too short for a zip file");
  int64_t tailLen = std::min<int64_t>(size, 22 + 65535);
  std::vector<unsigned char> tail((size_t)tailLen);
  fd.read(size - tailLen, tailLen, tail.data());
  int64_t at = -1;  // the end-of-central-directory record: its comment runs to the end
  for (int64_t i = tailLen - 22; i >= 0 && at < 0; --i)
    if (le32(&tail[(size_t)i]) == 0x06054b50 && i + 22 + le16(&tail[(size_t)i + 20]) == tailLen) at = i;
  if (at < 0) bad(where, notZip + "it has no zip end-of-central-directory record");
  const unsigned char *e = &tail[(size_t)at];
  const int64_t eocd = size - tailLen + at;
  uint64_t disk = le16(e + 4), cdDisk = le16(e + 6), here = le16(e + 8), entries = le16(e + 10);
  uint64_t cdSize = le32(e + 12), cdOffset = le32(e + 16);
  uint64_t cdEnd = (uint64_t)eocd;  // the central directory ends where the end records begin
  // zip64: a locator just before the record points at the zip64 end-of-central-directory,
  // whose fields replace the saturated ones. A count of exactly 65535 is saturated-looking
  // but real when no locator follows: numpy (Python's zipfile) and savez write 65535 members
  // without zip64 records, so only the sizes and offsets, which cannot be real at 0xFFFFFFFF
  // in a file whose records fit, need the locator.
  unsigned char loc[20];
  bool locator = false;
  if (eocd >= 20) {
    fd.read(eocd - 20, 20, loc);
    locator = le32(loc) == 0x07064b50;
  }
  if (!locator && (cdSize == 0xFFFFFFFF || cdOffset == 0xFFFFFFFF))
    bad(where, "corrupt zip64 archive: no zip64 end-of-central-directory locator");
  if (locator && (here == 0xFFFF || entries == 0xFFFF || cdSize == 0xFFFFFFFF || cdOffset == 0xFFFFFFFF)) {
    unsigned char r[56];
    uint64_t pos = le64(loc + 8);
    if (eocd < 20 + 56 || pos > (uint64_t)(eocd - 20 - 56))
      bad(where, "corrupt zip64 archive: no valid zip64 end-of-central-directory locator");
    fd.read((int64_t)pos, 56, r);
    if (le32(r) != 0x06064b50) bad(where, "corrupt zip64 archive: no zip64 end-of-central-directory record");
    disk = le32(r + 16);
    cdDisk = le32(r + 20);
    here = le64(r + 24);
    entries = le64(r + 32);
    cdSize = le64(r + 40);
    cdOffset = le64(r + 48);
    cdEnd = pos;
  }
  if (disk != 0 || cdDisk != 0 || here != entries)
    bad(where, "multi-disk (split) zip archives are not supported");
  if (cdOffset > cdEnd || cdSize > cdEnd - cdOffset)
    bad(where, "truncated or corrupt .npz archive: its central directory (" + num((int64_t)cdSize) + " bytes at offset " +
                   std::to_string(cdOffset) + ") lies outside the file");
  std::vector<unsigned char> cd((size_t)cdSize);
  fd.read((int64_t)cdOffset, (int64_t)cdSize, cd.data());

  std::vector<Member> out;
  size_t p = 0;
  for (uint64_t k = 0; k < entries; ++k) {
    const std::string corrupt = "corrupt .npz archive: central directory entry " + std::to_string(k);
    if (p + 46 > cd.size() || le32(&cd[p]) != 0x02014b50) bad(where, corrupt + " is damaged");
    const unsigned char *c = &cd[p];
    Member m;
    m.flags = le16(c + 8);
    m.method = le16(c + 10);
    m.crc = le32(c + 16);
    m.csize = le32(c + 20);
    m.usize = le32(c + 24);
    size_t nameLen = le16(c + 28), extraLen = le16(c + 30), commentLen = le16(c + 32);
    uint32_t diskStart = le16(c + 34);
    m.local = le32(c + 42);
    if (p + 46 + nameLen + extraLen + commentLen > cd.size()) bad(where, corrupt + " runs past the directory's end");
    m.name.assign(reinterpret_cast<const char *>(c + 46), nameLen);
    // Fields saturated at 0xFFFFFFFF are in the zip64 extra field (id 1), in this order.
    bool needU = m.usize == 0xFFFFFFFF, needC = m.csize == 0xFFFFFFFF, needL = m.local == 0xFFFFFFFF;
    bool needD = diskStart == 0xFFFF;
    if (needU || needC || needL || needD) {
      const unsigned char *x = c + 46 + nameLen, *end = x + extraLen;
      bool found = false;
      while (x + 4 <= end && !found) {
        uint32_t id = le16(x), len = le16(x + 2);
        if (x + 4 + len > end) break;
        if (id == 1) {
          const unsigned char *f = x + 4, *fend = f + len;
          auto take = [&](uint64_t &v) {
            if (f + 8 > fend) bad(where, corrupt + " (" + m.name + ") has a short zip64 extra field");
            v = le64(f);
            f += 8;
          };
          if (needU) take(m.usize);
          if (needC) take(m.csize);
          if (needL) take(m.local);
          if (needD) {
            if (f + 4 > fend) bad(where, corrupt + " (" + m.name + ") has a short zip64 extra field");
            diskStart = le32(f);
          }
          found = true;
        }
        x += 4 + len;
      }
      if (!found) bad(where, corrupt + " (" + m.name + ") lacks its zip64 extra field");
    }
    if (diskStart != 0) bad(where, "multi-disk (split) zip archives are not supported");
    if (m.usize > ((uint64_t)1 << 62) || m.csize > ((uint64_t)1 << 62) || m.local > ((uint64_t)1 << 62))
      bad(where, corrupt + " (" + m.name + ") gives an impossible size or offset");
    out.push_back(std::move(m));
    p += 46 + nameLen + extraLen + commentLen;
  }
  return out;
}

// "'w1', 'b1'": the keys numpy would list (member names without .npy), in archive order.
std::string keyList(const std::vector<Member> &ms) {
  std::string s;
  size_t shown = 0;
  for (const Member &m : ms) {
    std::string k = m.name;
    if (k.size() > 4 && k.compare(k.size() - 4, 4, ".npy") == 0) k.resize(k.size() - 4);
    if (s.size() + k.size() > 600) break;  // messages stay short; the count says how many more
    s += (s.empty() ? "'" : ", '") + k + "'";
    ++shown;
  }
  if (shown < ms.size()) s += ", ... (" + std::to_string(ms.size()) + " in all)";
  return s;
}

// The source of the array `key` in the archive: member `key`.npy (or, as numpy also accepts, a
// member named exactly `key`). Missing keys list the keys present.
std::unique_ptr<Source> openMember(Fd &fd, const std::string &where, const std::string &key) {
  if (fd.startsWith(kMagic, 6)) bad(where, "this is a .npy file, not a .npz archive: load it without key=");
  std::vector<Member> ms = readDirectory(fd, where);
  const Member *m = nullptr;
  for (const Member &c : ms)
    if (c.name == key + ".npy") m = &c;  // the last of duplicates wins, as in Python's zipfile
  if (!m)
    for (const Member &c : ms)
      if (c.name == key) m = &c;
  if (!m)
    bad(where, ms.empty() ? std::string("not in the archive, which holds no arrays")
                          : "not in the archive; its keys are " + keyList(ms));
  const std::string member = "member '" + m->name + "'";
  if (m->flags & 1) bad(where, member + " is encrypted; shmapc reads unencrypted archives (as numpy writes)");
  if (m->method != 0 && m->method != 8)
    bad(where, member + " uses zip compression method " + std::to_string(m->method) +
                   "; shmapc reads stored (0: np.savez) and deflated (8: np.savez_compressed) members");
  if (m->method == 0 && m->csize != m->usize)
    bad(where, "corrupt .npz archive: stored " + member + " gives a compressed size of " + std::to_string(m->csize) +
                   " bytes but a size of " + std::to_string(m->usize));
  const int64_t size = fd.size();
  if ((int64_t)m->local > size - 30)
    bad(where, "truncated .npz archive: the local header of " + member + " (at offset " + std::to_string(m->local) +
                   ") lies past the end of the file (" + num(size) + " bytes)");
  unsigned char lh[30];
  fd.read((int64_t)m->local, 30, lh);
  if (le32(lh) != 0x04034b50)
    bad(where, "corrupt .npz archive: no local header for " + member + " at offset " + std::to_string(m->local));
  int64_t data = (int64_t)m->local + 30 + le16(lh + 26) + le16(lh + 28);
  if (data > size || (int64_t)m->csize > size - data)
    bad(where, "truncated .npz archive: " + member + " needs " + std::to_string(m->csize) + " bytes from offset " +
                   num(data) + " but the file ends at " + num(size));
  std::unique_ptr<Source> src;
  if (m->method == 0)
    src = std::make_unique<FileRange>(fd, data, (int64_t)m->usize, true, m->crc);
  else
    src = std::make_unique<InflateRange>(fd, where, data, (int64_t)m->csize, (int64_t)m->usize, m->crc);
  src->where = where;
  src->noun = "the member";
  return src;
}

// ---------------------------------------------------------------- the .npy layer

// Reads a block of a C-order array (`shape`, data at `base`): the block's elements, in C order,
// come in runs: dimensions after the last one the block does not span whole are contiguous.
void readRuns(Source &src, int64_t base, int64_t esize, int32_t rank, const int64_t *shape,
              const int64_t *start, const int64_t *bshape, void *dst) {
  int64_t total = num_elements(rank, bshape);
  if (total == 0) return;
  int k = rank - 1;
  while (k >= 0 && bshape[k] == shape[k]) --k;
  int64_t strides[kMaxRank];
  row_major_strides(rank, shape, strides);
  const int64_t run = k < 0 ? total : bshape[k] * strides[k];
  int64_t idx[kMaxRank] = {0};  // over dimensions 0..k-1
  char *out = static_cast<char *>(dst);
  for (int64_t done = 0; done < total; done += run) {
    int64_t off = k >= 0 ? start[k] * strides[k] : 0;
    for (int d = 0; d < k; ++d) off += (start[d] + idx[d]) * strides[d];
    src.read(base + off * esize, run * esize, out);
    out += run * esize;
    for (int d = k - 1; d >= 0; --d) {
      if (++idx[d] < bshape[d]) break;
      idx[d] = 0;
    }
  }
}

// Checks the array's header against the program's type (dtype, global shape) and fills `out`
// with the block [start, start + bshape) in C order.
void loadBlock(Source &src, int32_t dtype, int32_t rank, const int64_t *shape, const int64_t *start,
               const int64_t *bshape, void *out) {
  const std::string &where = src.where;
  check_rank(rank, "load");
  const std::string notNpy = src.noun == "the file" ? "not a .npy file" : "not a .npy array";
  unsigned char pre[12];
  if (src.size < 10) bad(where, notNpy + " (it does not start with \\x93NUMPY)");
  src.read(0, 10, pre);
  if (std::memcmp(pre, kMagic, 6) != 0) bad(where, notNpy + " (it does not start with \\x93NUMPY)");
  int major = pre[6];
  if (major < 1 || major > 3)
    bad(where, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(pre[7]));
  int64_t headerLen, prefix = 10;
  if (major == 1) {
    headerLen = le16(pre + 8);
  } else {
    if (src.size < 12) bad(where, "truncated .npy header");
    src.read(10, 2, pre + 10);
    headerLen = le32(pre + 8);
    prefix = 12;
  }
  if (headerLen > kMaxHeaderBytes || prefix + headerLen > src.size)
    bad(where, "truncated or corrupt .npy header (it claims " + num(headerLen) + " bytes)");
  std::string text((size_t)headerLen, '\0');
  if (headerLen > 0) src.read(prefix, headerLen, &text[0]);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) text.pop_back();
  NpyHeader h = parse_npy_header(where, text);

  std::vector<int64_t> want(shape, shape + rank);
  std::string type = std::string(languageName(dtype)) + "[";
  for (int32_t d = 0; d < rank; ++d) type += (d ? "," : "") + num(shape[d]);
  type += "]";
  if (!matches(h, dtype))
    bad(where, src.noun + " holds " + numpyName(h) + " but the program loads " + type +
                   "; convert it in numpy (a.astype(np." + numpyNameOf(dtype) + ")) or change the type");
  if (h.shape != want)
    bad(where, src.noun + " holds an array of shape " + shapeText(h.shape) + " but the program loads " + type +
                   " (shape " + shapeText(want) + ")");

  int64_t esize = dtype_size(dtype), bytes = num_elements(rank, shape) * esize;
  int64_t dataStart = prefix + headerLen, have = src.size - dataStart;
  if (have < bytes)
    bad(where, "truncated: the data should be " + num(bytes) + " bytes but " + src.noun + " holds " + num(have));
  if (have > bytes) bad(where, src.noun + " holds " + num(have - bytes) + " bytes after the array's data");

  for (int32_t d = 0; d < rank; ++d)
    if (start[d] < 0 || bshape[d] < 0 || start[d] > shape[d] - bshape[d])
      bad(where, "load: block of shape " + shapeText(std::vector<int64_t>(bshape, bshape + rank)) + " at " +
                     shapeText(std::vector<int64_t>(start, start + rank)) + " lies outside the array");
  int64_t n = num_elements(rank, bshape);
  if (h.fortran && rank > 1) {
    // Column-major: the file holds the C-order array of the reversed shape, whose block is the
    // reversed block; read it, then transpose it into place.
    int64_t rs[kMaxRank], rstart[kMaxRank], rb[kMaxRank], sstr[kMaxRank], src_str[kMaxRank], dst_str[kMaxRank];
    for (int32_t d = 0; d < rank; ++d) {
      rs[d] = shape[rank - 1 - d];
      rstart[d] = start[rank - 1 - d];
      rb[d] = bshape[rank - 1 - d];
    }
    std::vector<unsigned char> staging((size_t)(n * esize));
    readRuns(src, dataStart, esize, rank, rs, rstart, rb, staging.data());
    row_major_strides(rank, rb, sstr);
    for (int32_t d = 0; d < rank; ++d) src_str[d] = sstr[rank - 1 - d];
    row_major_strides(rank, bshape, dst_str);
    copy_strided(esize, rank, bshape, staging.data(), src_str, out, dst_str);
  } else {
    readRuns(src, dataStart, esize, rank, shape, start, bshape, out);
  }
  src.finish();
  if (h.order == '>' && esize > 1) byteswap(out, n, esize);
  if (dtype == SHM_BOOL) {  // the language's bools are 0 or 1
    unsigned char *p = static_cast<unsigned char *>(out);
    for (int64_t i = 0; i < n; ++i) p[i] = p[i] != 0;
  }
}

// Opens `path` (a .npy file, or with a key the array `key` of an .npz archive) and loads the block.
void load(const char *path, const char *key, int32_t dtype, int32_t rank, const int64_t *shape,
          const int64_t *start, const int64_t *bshape, void *out) {
  if (!path) fatalf("load: no path");
  std::string where = path;
  if (key) where += std::string(": key '") + key + "'";
  Fd fd(where, path);
  if (key) {
    std::unique_ptr<Source> src = openMember(fd, where, key);
    loadBlock(*src, dtype, rank, shape, start, bshape, out);
    return;
  }
  if (fd.startsWithZip()) {
    std::vector<Member> ms = readDirectory(fd, where);
    bad(where, "this is a .npz archive, not a .npy file: name the array to load with key=" +
                   (ms.empty() ? std::string(" (the archive holds no arrays)") : " (its keys are " + keyList(ms) + ")"));
  }
  FileRange src(fd, 0, fd.size(), false, 0);
  src.where = where;
  loadBlock(src, dtype, rank, shape, start, bshape, out);
}

void loadWhole(const char *path, const char *key, int32_t dtype, int32_t rank, const int64_t *shape, void *out) {
  check_rank(rank, "load");
  int64_t zero[kMaxRank] = {0};
  load(path, key, dtype, rank, shape, zero, shape, out);
}

// ---------------------------------------------------------------- writing

// The bytes before a .npy file's data: version 1's magic, version and 2-byte length, then the
// header dict padded with spaces and ended by a newline so that the data starts at a multiple
// of 64 bytes.
std::string npyPrefix(int32_t dtype, int32_t rank, const int64_t *shape, const char *what) {
  check_rank(rank, what);
  std::vector<int64_t> dims(shape, shape + rank);
  std::string header = std::string("{'descr': '") + descrOf(dtype, what) +
                       "', 'fortran_order': False, 'shape': " + shapeText(dims) + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += (char)(header.size() & 0xff);
  out += (char)(header.size() >> 8);
  return out + header;
}

// The bytes of a file being written, gathered into large writes (an archive's many small
// headers would otherwise be a system call each).
struct Sink {
  safe_write::Output out;
  std::string buffer, error;
  bool flush() {
    bool ok = out.write(buffer.data(), buffer.size(), error);
    buffer.clear();
    return ok;
  }
};

// Writes `path` through safe_write (a temporary file in the same folder, synced and renamed
// over it; a device or FIFO in place).
void writeAtomically(const char *path, const std::function<bool(Sink &)> &write) {
  Sink sink;
  if (!sink.out.open(path, false, sink.error)) bad(path, "cannot write: " + sink.error);
  if (!write(sink) || !sink.flush() || !sink.out.commit(sink.error)) {
    sink.out.abandon();
    bad(path, "cannot write: " + sink.error);
  }
}

bool put(Sink &f, const void *p, int64_t n) {
  if (n <= 0) return true;
  if (f.buffer.size() + (size_t)n > (1u << 20) && !f.flush()) return false;
  if (n >= (1 << 20)) return f.out.write(p, (size_t)n, f.error);
  f.buffer.append(static_cast<const char *>(p), (size_t)n);
  return true;
}

void put16(std::string &s, uint32_t v) {
  s += (char)(v & 0xff);
  s += (char)((v >> 8) & 0xff);
}
void put32(std::string &s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

} // namespace

} // namespace shm

using namespace shm;

extern "C" void shm_load_npy(const char *path, int32_t dtype, int32_t rank, const int64_t *shape,
                             void *out) {
  SHM_GUARD_BEGIN
  loadWhole(path, nullptr, dtype, rank, shape, out);
  SHM_GUARD_END("load")
}

extern "C" void shm_load_npz(const char *path, const char *key, int32_t dtype, int32_t rank,
                             const int64_t *shape, void *out) {
  SHM_GUARD_BEGIN
  if (!key) fatalf("load: no key");
  loadWhole(path, key, dtype, rank, shape, out);
  SHM_GUARD_END("load")
}

extern "C" void shm_load_npy_block(const char *path, const char *key, int32_t dtype, int32_t rank,
                                   const int64_t *global_shape, const int64_t *block_start,
                                   const int64_t *block_shape, void *out) {
  SHM_GUARD_BEGIN
  load(path, key, dtype, rank, global_shape, block_start, block_shape, out);
  SHM_GUARD_END("load")
}

extern "C" void shm_load_npy_sharded(shm_device *dev, const char *path, const char *key, int32_t dtype,
                                     int32_t rank, const int64_t *global_shape, const int32_t *spec,
                                     void *out) {
  SHM_GUARD_BEGIN
  if (!dev) fatalf("%s: load with spec= outside a shmap body", path ? path : "load");
  check_rank(rank, "load");
  const MeshCall &c = *dev->call;
  int64_t start[kMaxRank], bshape[kMaxRank];
  int pos = 0;
  for (int32_t d = 0; d < rank; ++d) {
    int32_t k = spec[pos++];
    if (k < 0 || k > c.mesh_rank) fatalf("load: bad partition spec (dimension %d names %d axes)", (int)d, (int)k);
    int64_t parts = 1, index = 0;
    for (int32_t j = 0; j < k; ++j) {
      int32_t a = spec[pos++];
      if (a < 0 || a >= c.mesh_rank) fatalf("load: partition spec names mesh axis index %d, out of range", (int)a);
      parts *= c.sizes[a];
      index = index * c.sizes[a] + dev->coords[a];  // major to minor, as shm_run_shmap splits inputs
    }
    if (global_shape[d] < 0 || global_shape[d] % parts != 0)
      fatalf("load: dimension %d of size %lld is not divisible by %lld", (int)d, (long long)global_shape[d],
             (long long)parts);
    bshape[d] = global_shape[d] / parts;
    start[d] = index * bshape[d];
  }
  load(path, key, dtype, rank, global_shape, start, bshape, out);
  SHM_GUARD_END("load")
}

extern "C" void shm_save_npy(const char *path, int32_t dtype, int32_t rank, const int64_t *shape,
                             const void *data) {
  SHM_GUARD_BEGIN
  std::string prefix = npyPrefix(dtype, rank, shape, "save");
  int64_t bytes = num_elements(rank, shape) * dtype_size(dtype);
  // Every rank runs the host code; rank 0 writes, and the others wait for the file.
  if (shm::writes_output())
    writeAtomically(path, [&](Sink &f) { return put(f, prefix.data(), (int64_t)prefix.size()) && put(f, data, bytes); });
  shm::ranks_barrier();
  SHM_GUARD_END("save")
}

// A stored zip archive: per member a local header, the .npy bytes; then the central directory
// and its end record. DOS time 0, date 1980-01-01 (reproducible bytes).
namespace shm {

void write_npz(const char *path, int32_t n, const char *const *keys, const int32_t *dtypes, const int32_t *ranks,
               const int64_t *shapes, const void *const *data) {
  if (n < 0 || n > 0xFFFF) fatalf("%s: savez: %d arrays (an archive without zip64 holds at most 65535)", path, (int)n);
  struct Entry {
    std::string name, prefix;
    int64_t bytes = 0, offset = 0;
    uint32_t crc = 0;
  };
  std::vector<Entry> entries((size_t)n);
  int64_t offset = 0;
  const int64_t *shape = shapes;
  std::unordered_set<std::string> seen;  // (up to 65535 keys: a set, not pairwise comparisons)
  for (int32_t i = 0; i < n; ++i) {
    Entry &e = entries[(size_t)i];
    e.name = std::string(keys[i]) + ".npy";
    if (!seen.insert(e.name).second) bad(path, "savez: key '" + std::string(keys[i]) + "' is given twice");
    e.prefix = npyPrefix(dtypes[i], ranks[i], shape, "savez");
    e.bytes = num_elements(ranks[i], shape) * dtype_size(dtypes[i]);
    shape += ranks[i];
    int64_t member = (int64_t)e.prefix.size() + e.bytes;
    e.offset = offset;
    offset += 30 + (int64_t)e.name.size() + member;
    if (member > kMaxNpzBytes || offset > kMaxNpzBytes)
      bad(path, "key '" + std::string(keys[i]) + "': " +
                    (member > kMaxNpzBytes ? "the array takes " + num(member) + " bytes"
                                           : "the archive reaches " + num(offset) + " bytes with it") +
                    "; savez writes archives without zip64, where every member and the whole archive stay under "
                    "4 GiB: save large arrays with save() as .npy files");
  }
  int64_t centralBytes = 0;
  for (const Entry &e : entries) centralBytes += 46 + (int64_t)e.name.size();
  if (offset + centralBytes + 22 > kMaxNpzBytes)
    bad(path, "the archive would reach " + num(offset + centralBytes + 22) +
                  " bytes; savez writes archives without zip64, which stay under 4 GiB");
  for (int32_t i = 0; i < n; ++i) {
    Entry &e = entries[(size_t)i];
    e.crc = crc32Of(crc32Of(0, e.prefix.data(), (int64_t)e.prefix.size()), data[i], e.bytes);
  }
  // The fields local and central headers share, from "version needed" to the name's length.
  auto common = [](std::string &s, const Entry &e) {
    uint32_t size = (uint32_t)(e.prefix.size() + (size_t)e.bytes);
    put16(s, 20);      // version needed: 2.0
    put16(s, 0);       // flags
    put16(s, 0);       // method: stored
    put16(s, 0);       // time 00:00:00
    put16(s, 0x21);    // date 1980-01-01
    put32(s, e.crc);
    put32(s, size);    // compressed size
    put32(s, size);    // size
    put16(s, (uint32_t)e.name.size());
    put16(s, 0);       // extra field length
  };
  std::string central;
  for (const Entry &e : entries) {
    put32(central, 0x02014b50);
    put16(central, 0x0314);  // made by: Unix, zip 2.0
    common(central, e);
    put16(central, 0);  // comment length
    put16(central, 0);  // disk
    put16(central, 0);  // internal attributes
    put32(central, 0100644u << 16);  // external: a regular file, rw-r--r--
    put32(central, (uint32_t)e.offset);
    central += e.name;
  }
  std::string end;
  put32(end, 0x06054b50);
  put16(end, 0);
  put16(end, 0);
  put16(end, (uint32_t)n);
  put16(end, (uint32_t)n);
  put32(end, (uint32_t)central.size());
  put32(end, (uint32_t)offset);
  put16(end, 0);  // comment length
  auto write = [&](Sink &f) {
    for (int32_t i = 0; i < n; ++i) {
      const Entry &e = entries[(size_t)i];
      std::string local;
      put32(local, 0x04034b50);
      common(local, e);
      local += e.name;
      if (!put(f, local.data(), (int64_t)local.size()) || !put(f, e.prefix.data(), (int64_t)e.prefix.size()) ||
          !put(f, data[i], e.bytes))
        return false;
    }
    return put(f, central.data(), (int64_t)central.size()) && put(f, end.data(), (int64_t)end.size());
  };
  writeAtomically(path, write);
}

void write_file_atomically(const char *path, const std::string &bytes) {
  writeAtomically(path, [&](Sink &f) { return put(f, bytes.data(), (int64_t)bytes.size()); });
}

} // namespace shm

extern "C" void shm_save_npz(const char *path, int32_t n, const char *const *keys, const int32_t *dtypes,
                             const int32_t *ranks, const int64_t *shapes, const void *const *data) {
  SHM_GUARD_BEGIN
  // Every rank runs the host code; rank 0 writes, and the others wait for the file.
  if (shm::writes_output()) shm::write_npz(path, n, keys, dtypes, ranks, shapes, data);
  shm::ranks_barrier();
  SHM_GUARD_END("savez")
}
