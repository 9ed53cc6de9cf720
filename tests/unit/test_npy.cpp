// The runtime's .npy/.npz reader and writer against files numpy writes and reads
// (tests/numpy/npy_fixtures.py): every layout numpy produces loads to the same values, a block
// load reads only its block, and every bad file ends the program with `shmap runtime error:
// FILE: ...` (FILE: key 'K': ... in an archive) and exit status 2.
#include "npy.h"
#include "shmap_runtime.h"

#include <catch2/catch.hpp>
#include "child.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

std::string fixtures() {
  static std::string dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/shmapc-npy-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    std::string script = std::string(SHMAPC_TESTS_DIR) + "/numpy/npy_fixtures.py";
    REQUIRE(std::system(("/usr/bin/python3 " + script + " " + dir).c_str()) == 0);
  }
  return dir;
}

std::string path(const std::string &name) { return fixtures() + "/" + name; }

// The fixtures' formula over the C-order flat index.
double value(int64_t i, int32_t dtype) {
  if (dtype == SHM_BOOL) return i % 2 == 1;
  if (dtype == SHM_I32) return (double)(i * 3 - 7);
  return i * 0.5 - 3;
}

template <typename T>
void checkValues(const std::vector<T> &got, int32_t dtype) {
  for (size_t i = 0; i < got.size(); ++i) CHECK((double)got[i] == value((int64_t)i, dtype));
}


// Loading `name` as f32 of `shape` fails with exit 2 and a message containing `what`; with a
// key, the array `key` of an archive, and the message names the key too.
void expectLoadError(const std::string &name, std::vector<int64_t> shape, const std::string &what,
                     int32_t dtype = SHM_F32, const char *key = nullptr) {
  std::string err, p = path(name);
  int status = run_child([&] {
    std::vector<double> out(64);
    if (key)
      shm_load_npz(p.c_str(), key, dtype, (int32_t)shape.size(), shape.data(), out.data());
    else
      shm_load_npy(p.c_str(), dtype, (int32_t)shape.size(), shape.data(), out.data());
  }, &err);
  INFO(name << ": " << err);
  CHECK(status == 2);
  std::string where = key ? p + ": key '" + key + "': " : p + ": ";
  CHECK(err.find("shmap runtime error: " + where) != std::string::npos);
  CHECK(err.find(what) != std::string::npos);
}

// The fixtures' value at a multi-index of an array of `shape` (C-order flat index).
double valueAt(const std::vector<int64_t> &shape, const std::vector<int64_t> &idx, int32_t dtype) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return value(flat, dtype);
}

// Checks that `got` (the block at `start` of shape `bshape`, C order) holds the fixture values.
template <typename T>
void checkBlock(const std::vector<T> &got, const std::vector<int64_t> &shape, const std::vector<int64_t> &start,
                const std::vector<int64_t> &bshape, int32_t dtype) {
  std::vector<int64_t> i(bshape.size(), 0), at(bshape.size());
  for (size_t k = 0; k < got.size(); ++k) {
    for (size_t d = 0; d < i.size(); ++d) at[d] = start[d] + i[d];
    INFO("block element " << k);
    CHECK((double)got[k] == valueAt(shape, at, dtype));
    for (size_t d = i.size(); d-- > 0;) {
      if (++i[d] < bshape[d]) break;
      i[d] = 0;
    }
  }
}

// The reads the runtime makes, through shm::npy_read_observer.
std::vector<std::pair<int64_t, int64_t>> g_reads;
void recordRead(int64_t offset, int64_t bytes) { g_reads.push_back({offset, bytes}); }

// Where a version-1 .npy file's data starts (its 10-byte prefix and header).
int64_t dataStart(const std::string &file) {
  unsigned char pre[10];
  FILE *f = std::fopen(file.c_str(), "rb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fread(pre, 1, 10, f) == 10);
  std::fclose(f);
  return 10 + (pre[8] | pre[9] << 8);
}

// Loads the block [start, start + bshape) of a C-order .npy fixture of `shape` and checks its
// values, and that the reader read the header and then exactly the block's bytes: every read
// past the header lies inside the block's rows, and they add up to the block's size.
template <typename T>
void checkBlockReads(const std::string &name, int32_t dtype, std::vector<int64_t> shape, std::vector<int64_t> start,
                     std::vector<int64_t> bshape) {
  INFO(name << " block at " << start[0] << "," << (start.size() > 1 ? start[1] : 0));
  int64_t n = 1;
  for (int64_t b : bshape) n *= b;
  std::vector<T> out((size_t)n);
  std::string file = path(name);
  int64_t data = dataStart(file), esize = (int64_t)sizeof(T);
  g_reads.clear();
  shm::npy_read_observer = recordRead;
  shm_load_npy_block(file.c_str(), nullptr, dtype, (int32_t)shape.size(), shape.data(), start.data(), bshape.data(),
                     out.data());
  shm::npy_read_observer = nullptr;
  checkBlock(out, shape, start, bshape, dtype);
  // The block's bytes in the file, element by element.
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  std::vector<bool> inBlock((size_t)total, false);
  std::vector<int64_t> i(bshape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + start[d] + i[d];
    inBlock[(size_t)flat] = true;
    for (size_t d = i.size(); d-- > 0;) {
      if (++i[d] < bshape[d]) break;
      i[d] = 0;
    }
  }
  int64_t dataBytes = 0;
  for (auto [offset, bytes] : g_reads) {
    if (offset + bytes <= data) continue;  // the prefix and header
    CHECK(offset >= data);
    CHECK((offset - data) % esize == 0);
    CHECK(bytes % esize == 0);
    for (int64_t e = (offset - data) / esize; e < (offset - data + bytes) / esize; ++e) {
      REQUIRE(e < (int64_t)inBlock.size());
      CHECK(inBlock[(size_t)e]);
    }
    dataBytes += bytes;
  }
  CHECK(dataBytes == n * esize);
}

// A shmap body that loads its block of g_sharded_path under g_sharded_spec (shm_run_shmap).
const char *g_sharded_path = nullptr;
const char *g_sharded_key = nullptr;
const int32_t *g_sharded_spec = nullptr;
int64_t g_sharded_shape[2];
int32_t g_sharded_dtype = SHM_F32;
void shardedBody(shm_device *dev, void **outs, void **) {
  shm_load_npy_sharded(dev, g_sharded_path, g_sharded_key, g_sharded_dtype, 2, g_sharded_shape, g_sharded_spec, outs[0]);
}

} // namespace

TEST_CASE("npy: every layout numpy writes loads to the same values", "[npy][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) {
    WARN("no /usr/bin/python3: skipped");
    return;
  }
  SECTION("f32, C order, versions 1, 2 and 3") {
    for (const char *name : {"f32_2x3.npy", "f32_v2.npy", "f32_v3.npy"}) {
      const int64_t shape[2] = {2, 3};
      std::vector<float> out(6);
      shm_load_npy(path(name).c_str(), SHM_F32, 2, shape, out.data());
      checkValues(out, SHM_F32);
    }
  }
  SECTION("f64 big-endian") {
    const int64_t shape[1] = {4};
    std::vector<double> out(4);
    shm_load_npy(path("f64_big_endian.npy").c_str(), SHM_F64, 1, shape, out.data());
    checkValues(out, SHM_F64);
  }
  SECTION("Fortran order, 2-D and 3-D") {
    const int64_t s2[2] = {3, 4}, s3[3] = {2, 3, 4};
    std::vector<int32_t> a(12);
    shm_load_npy(path("i32_fortran.npy").c_str(), SHM_I32, 2, s2, a.data());
    checkValues(a, SHM_I32);
    std::vector<float> b(24);
    shm_load_npy(path("f32_fortran_3d.npy").c_str(), SHM_F32, 3, s3, b.data());
    checkValues(b, SHM_F32);
  }
  SECTION("bool and a rank-0 array") {
    const int64_t s[1] = {5};
    std::vector<unsigned char> a(5);
    shm_load_npy(path("bool_5.npy").c_str(), SHM_BOOL, 1, s, a.data());
    checkValues(a, SHM_BOOL);
    float x = 0;
    shm_load_npy(path("f32_scalar.npy").c_str(), SHM_F32, 0, nullptr, &x);
    CHECK(x == -3.0f);
  }
}

TEST_CASE("npy: bad files are refused, naming the file", "[npy][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) return;
  expectLoadError("missing.npy", {2, 3}, "cannot open: No such file or directory");
  expectLoadError("a_directory.npy", {2, 3}, "not a regular file");
  expectLoadError("not_npy.npy", {2, 3}, "not a .npy file");
  expectLoadError("short.npy", {2, 3}, "not a .npy file");
  expectLoadError("truncated.npy", {2, 3}, "truncated: the data should be 24 bytes but the file holds 19");
  expectLoadError("trailing.npy", {2, 3}, "the file holds 2 bytes after the array's data");
  expectLoadError("bad_header.npy", {2, 3}, "bad .npy header: unknown key 'shapf'");
  expectLoadError("structured.npy", {3}, "structured dtypes");
  expectLoadError("i64_2x3.npy", {2, 3}, "the file holds int64 but the program loads f32[2,3]");
  expectLoadError("f32_2x3.npy", {2, 3}, "the file holds float32 but the program loads f64[2,3]", SHM_F64);
  expectLoadError("f32_3x2.npy", {2, 3},
                  "the file holds an array of shape (3, 2) but the program loads f32[2,3] (shape (2, 3))");
}

TEST_CASE("npy: headers numpy reads load, however they are spelled", "[npy][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) return;
  // tests/numpy/npy_fixtures.py writes these and checks that numpy loads each one.
  for (const char *name : {"hdr_double_quotes", "hdr_no_byte_order", "hdr_spaces", "hdr_no_trailing_comma",
                           "hdr_trailing_commas", "hdr_key_order", "hdr_newlines", "hdr_name_descr",
                           "hdr_python2_long", "hdr_parenthesised", "hdr_repeated_key", "hdr_fortran_true"}) {
    INFO(name);
    std::vector<float> got(6, -100.0f);
    int64_t shape[2] = {2, 3};
    shm_load_npy(path(std::string(name) + ".npy").c_str(), SHM_F32, 2, shape, got.data());
    checkValues(got, SHM_F32);
  }
}

TEST_CASE("npy: each header defect has its own message", "[npy][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) return;
  // Headers numpy refuses too (npy_fixtures.py checks that).
  expectLoadError("hdr_missing_shape.npy", {2, 3}, "bad .npy header: no 'shape' key");
  expectLoadError("hdr_extra_key.npy", {2, 3}, "bad .npy header: unknown key 'x'");
  expectLoadError("hdr_order_int.npy", {2, 3}, "bad .npy header: 'fortran_order' is an integer, not True or False");
  expectLoadError("hdr_order_lower.npy", {2, 3}, "bad .npy header: 'false' is not a Python literal at character 35");
  expectLoadError("hdr_shape_list.npy", {2, 3}, "bad .npy header: 'shape' is a list, not a tuple of integers");
  expectLoadError("hdr_shape_float.npy", {2, 3}, "bad .npy header: not an integer at character 52");
  expectLoadError("hdr_not_dict.npy", {2, 3}, "bad .npy header: it is a list, not a dict");
  expectLoadError("hdr_unclosed.npy", {2, 3}, "bad .npy header: no '}' closes the '{'");
  expectLoadError("hdr_unterminated.npy", {2, 3}, "bad .npy header: expected ',' or '}' at character 18");
  expectLoadError("hdr_no_colon.npy", {2, 3}, "bad .npy header: expected ':' after a dict key at character 15");
}

TEST_CASE("npy: saved files are what numpy reads back", "[npy][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) return;
  std::string d = fixtures();
  auto fill = [](std::vector<double> &v, int32_t dtype) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = value((int64_t)i, dtype);
  };
  std::vector<double> f64(4);
  fill(f64, SHM_F64);
  std::vector<float> f32(6);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = (float)value((int64_t)i, SHM_F32);
  std::vector<int32_t> i32(12);
  for (size_t i = 0; i < i32.size(); ++i) i32[i] = (int32_t)value((int64_t)i, SHM_I32);
  std::vector<unsigned char> b(5);
  for (size_t i = 0; i < b.size(); ++i) b[i] = (unsigned char)value((int64_t)i, SHM_BOOL);
  const int64_t s23[2] = {2, 3}, s4[1] = {4}, s34[2] = {3, 4}, s5[1] = {5};
  float scalar = -3.0f;
  shm_save_npy((d + "/saved_f32.npy").c_str(), SHM_F32, 2, s23, f32.data());
  shm_save_npy((d + "/saved_f64.npy").c_str(), SHM_F64, 1, s4, f64.data());
  shm_save_npy((d + "/saved_i32.npy").c_str(), SHM_I32, 2, s34, i32.data());
  shm_save_npy((d + "/saved_bool.npy").c_str(), SHM_BOOL, 1, s5, b.data());
  shm_save_npy((d + "/saved_scalar.npy").c_str(), SHM_F32, 0, nullptr, &scalar);
  {  // an archive of f32 [2,3], bool [5], i32 [3,4], f64 [4] and an f32 scalar
    const char *keys[] = {"a", "b", "c", "d", "s"};
    const int32_t dtypes[] = {SHM_F32, SHM_BOOL, SHM_I32, SHM_F64, SHM_F32}, ranks[] = {2, 1, 2, 1, 0};
    const int64_t shapes[] = {2, 3, 5, 3, 4, 4};
    const void *data[] = {f32.data(), b.data(), i32.data(), f64.data(), &scalar};
    shm_save_npz((d + "/saved.npz").c_str(), 5, keys, dtypes, ranks, shapes, data);
  }
  std::string script = std::string(SHMAPC_TESTS_DIR) + "/numpy/npy_fixtures.py";
  CHECK(std::system(("/usr/bin/python3 " + script + " check " + d).c_str()) == 0);

  SECTION("a save that cannot write names the file and leaves nothing behind") {
    std::string err, p = d + "/no_such_dir/w.npy";
    CHECK(run_child([&] { shm_save_npy(p.c_str(), SHM_F32, 2, s23, f32.data()); }, &err) == 2);
    CHECK(err.find("shmap runtime error: " + p + ": cannot write") != std::string::npos);
    err.clear();
    p = d + "/no_such_dir/w.npz";
    const char *keys[] = {"w"};
    const int32_t dtypes[] = {SHM_F32}, ranks[] = {2};
    const void *data[] = {f32.data()};
    CHECK(run_child([&] { shm_save_npz(p.c_str(), 1, keys, dtypes, ranks, s23, data); }, &err) == 2);
    CHECK(err.find("shmap runtime error: " + p + ": cannot write") != std::string::npos);
  }

  SECTION("savez refuses members and archives of 4 GiB or more before writing anything") {
    // Without zip64 records an archive's sizes and offsets are 32-bit. The data pointers are
    // never read: the sizes are checked first.
    std::string err, p = d + "/big.npz";
    const char *keys[] = {"small", "big"};
    const int32_t dtypes[] = {SHM_F32, SHM_F32}, ranks[] = {1, 1};
    const int64_t shapes[] = {3, (int64_t)1 << 30};  // 4 GiB of f32
    const void *data[] = {f32.data(), f32.data()};
    CHECK(run_child([&] { shm_save_npz(p.c_str(), 2, keys, dtypes, ranks, shapes, data); }, &err) == 2);
    INFO(err);
    CHECK(err.find("shmap runtime error: " + p + ": key 'big': the array takes 4294967424 bytes") != std::string::npos);
    CHECK(err.find("under 4 GiB") != std::string::npos);
    struct stat st;
    CHECK(stat(p.c_str(), &st) != 0);
    err.clear();  // two members of 2 GiB each: each fits, the archive does not
    const int64_t halves[] = {(int64_t)1 << 29, (int64_t)1 << 29};
    CHECK(run_child([&] { shm_save_npz(p.c_str(), 2, keys, dtypes, ranks, halves, data); }, &err) == 2);
    CHECK(err.find("key 'big': the archive reaches") != std::string::npos);
    CHECK(stat(p.c_str(), &st) != 0);
  }
}

TEST_CASE("npz: the arrays of np.savez and np.savez_compressed load by key", "[npz][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) return;
  for (const char *name : {"arrays.npz", "arrays_compressed.npz"}) {
    INFO(name);
    std::string p = path(name);
    const int64_t s23[2] = {2, 3}, s5[1] = {5}, s34[2] = {3, 4}, s64[2] = {6, 4};
    std::vector<float> a(6);
    shm_load_npz(p.c_str(), "a", SHM_F32, 2, s23, a.data());
    checkValues(a, SHM_F32);
    std::vector<unsigned char> b(5);
    shm_load_npz(p.c_str(), "b", SHM_BOOL, 1, s5, b.data());
    checkValues(b, SHM_BOOL);
    std::vector<int32_t> c(12), f(24);
    shm_load_npz(p.c_str(), "c", SHM_I32, 2, s34, c.data());
    checkValues(c, SHM_I32);
    shm_load_npz(p.c_str(), "f", SHM_I32, 2, s64, f.data());  // Fortran order
    checkValues(f, SHM_I32);
    shm_load_npz(p.c_str(), "a.npy", SHM_F32, 2, s23, a.data());  // the member's own name, as numpy
    checkValues(a, SHM_F32);
  }
  SECTION("zip64 central directory entries and end records") {
    const int64_t s23[2] = {2, 3};
    std::vector<float> a(6);
    shm_load_npz(path("zip64.npz").c_str(), "a", SHM_F32, 2, s23, a.data());
    checkValues(a, SHM_F32);
  }
  SECTION("65535 members, the count 0xFFFF without zip64 records (as np.savez writes them)") {
    int32_t first = 0, last = 0;
    shm_load_npz(path("members_65535.npz").c_str(), "a0", SHM_I32, 0, nullptr, &first);
    shm_load_npz(path("members_65535.npz").c_str(), "a65534", SHM_I32, 0, nullptr, &last);
    CHECK(first == -7);
    CHECK(last == 65534 * 3 - 7);
  }
  SECTION("65535 members written by savez load back") {
    const int32_t n = 65535;
    std::vector<std::string> names((size_t)n);
    std::vector<const char *> keys((size_t)n);
    std::vector<int32_t> dtypes((size_t)n, SHM_I32), ranks((size_t)n, 0), values((size_t)n);
    std::vector<const void *> data((size_t)n);
    for (int32_t i = 0; i < n; ++i) {
      names[(size_t)i] = "k" + std::to_string(i);
      keys[(size_t)i] = names[(size_t)i].c_str();
      values[(size_t)i] = i * 7;
      data[(size_t)i] = &values[(size_t)i];
    }
    const std::string p = fixtures() + "/saved_65535.npz";
    shm_save_npz(p.c_str(), n, keys.data(), dtypes.data(), ranks.data(), nullptr, data.data());
    int32_t got = 0;
    shm_load_npz(p.c_str(), "k65534", SHM_I32, 0, nullptr, &got);
    CHECK(got == 65534 * 7);
  }
}

TEST_CASE("npz: bad archives are refused, naming the file and the key", "[npz][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) return;
  expectLoadError("arrays.npz", {2, 3}, "not in the archive; its keys are 'a', 'b', 'c', 'g', 'f'", SHM_F32, "w");
  expectLoadError("empty.npz", {2, 3}, "not in the archive, which holds no arrays", SHM_F32, "a");
  expectLoadError("truncated.npz", {2, 3}, "not a .npz archive, or truncated: it has no zip end-of-central-directory record",
                  SHM_F32, "a");
  expectLoadError("not_zip.npz", {2, 3}, "not a .npz archive, or truncated", SHM_F32, "a");
  expectLoadError("missing.npz", {2, 3}, "cannot open: No such file or directory", SHM_F32, "a");
  expectLoadError("bad_crc_stored.npz", {2, 3}, "CRC-32 mismatch", SHM_F32, "a");
  expectLoadError("bad_crc_deflated.npz", {2, 3}, "CRC-32 mismatch", SHM_F32, "a");
  expectLoadError("corrupt_deflate.npz", {2, 3}, "corrupt compressed data (zlib: invalid block type)", SHM_F32, "a");
  expectLoadError("bzip2.npz", {2, 3},
                  "member 'a.npy' uses zip compression method 12; shmapc reads stored (0: np.savez) and deflated "
                  "(8: np.savez_compressed) members",
                  SHM_F32, "a");
  expectLoadError("arrays_compressed.npz", {2, 3}, "the member holds float32 but the program loads f64[2,3]", SHM_F64,
                  "a");
  expectLoadError("arrays.npz", {3, 2},
                  "the member holds an array of shape (2, 3) but the program loads f32[3,2] (shape (3, 2))", SHM_F32,
                  "a");
  expectLoadError("f32_2x3.npy", {2, 3}, "this is a .npy file, not a .npz archive: load it without key=", SHM_F32, "a");
  expectLoadError("arrays.npz", {2, 3},
                  "this is a .npz archive, not a .npy file: name the array to load with key= (its keys are 'a', 'b', 'c', "
                  "'g', 'f')");
}

TEST_CASE("npy blocks: each block has the file's values, and only its bytes are read", "[npy][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) return;
  SECTION("C order, blocks of a 2x2 mesh under P(x, y), P(x, None) and P(None, y)") {
    for (int64_t r : {0, 4})
      for (int64_t c : {0, 2}) checkBlockReads<float>("blk_f32_8x4.npy", SHM_F32, {8, 4}, {r, c}, {4, 2});
    for (int64_t r : {0, 4}) checkBlockReads<float>("blk_f32_8x4.npy", SHM_F32, {8, 4}, {r, 0}, {4, 4});
    for (int64_t c : {0, 2}) checkBlockReads<float>("blk_f32_8x4.npy", SHM_F32, {8, 4}, {0, c}, {8, 2});
    checkBlockReads<float>("blk_f32_8x4.npy", SHM_F32, {8, 4}, {3, 1}, {1, 1});  // one element
    checkBlockReads<float>("blk_f32_8x4.npy", SHM_F32, {8, 4}, {0, 0}, {8, 4});  // the whole array
    CHECK(g_reads.size() == 4);  // a zip archive's signature?, the prefix, the header, the data
  }
  SECTION("3-D, big-endian") {
    checkBlockReads<float>("blk_f32_4x6x4.npy", SHM_F32, {4, 6, 4}, {2, 3, 0}, {2, 3, 4});
    checkBlockReads<float>("blk_f32_4x6x4.npy", SHM_F32, {4, 6, 4}, {0, 2, 2}, {4, 2, 2});
    checkBlockReads<double>("blk_f64_4x6_be.npy", SHM_F64, {4, 6}, {2, 3}, {2, 3});
  }
  SECTION("Fortran order: the block of the reversed array, transposed") {
    const int64_t shape[2] = {6, 4};
    for (int64_t r : {0, 3})
      for (int64_t c : {0, 2}) {
        const int64_t start[2] = {r, c}, bshape[2] = {3, 2};
        std::vector<int32_t> out(6);
        shm_load_npy_block(path("blk_i32_6x4_fortran.npy").c_str(), nullptr, SHM_I32, 2, shape, start, bshape,
                           out.data());
        checkBlock(out, {6, 4}, {r, c}, {3, 2}, SHM_I32);
      }
    const int64_t s3[3] = {4, 6, 4}, start3[3] = {2, 0, 1}, b3[3] = {2, 3, 2};
    std::vector<float> out3(12);
    shm_load_npy_block(path("blk_f32_4x6x4_fortran.npy").c_str(), nullptr, SHM_F32, 3, s3, start3, b3, out3.data());
    checkBlock(out3, {4, 6, 4}, {2, 0, 1}, {2, 3, 2}, SHM_F32);
  }
  SECTION("archive members: stored (read in place) and deflated (inflated as a stream)") {
    const int64_t shape[2] = {8, 4}, start[2] = {4, 2}, bshape[2] = {4, 2};
    for (const char *name : {"arrays.npz", "arrays_compressed.npz"}) {
      INFO(name);
      std::vector<float> out(8);
      shm_load_npy_block(path(name).c_str(), "g", SHM_F32, 2, shape, start, bshape, out.data());
      checkBlock(out, {8, 4}, {4, 2}, {4, 2}, SHM_F32);
    }
  }
}

TEST_CASE("npy blocks: the global type is checked against the file", "[npy][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) return;
  std::string err, p = path("blk_f32_8x4.npy");
  const int64_t wrong[2] = {4, 8}, shape[2] = {8, 4}, start[2] = {0, 0}, bshape[2] = {2, 4}, outside[2] = {7, 0};
  std::vector<float> out(8);
  CHECK(run_child([&] { shm_load_npy_block(p.c_str(), nullptr, SHM_F32, 2, wrong, start, bshape, out.data()); }, &err) ==
        2);
  CHECK(err.find("shmap runtime error: " + p +
                 ": the file holds an array of shape (8, 4) but the program loads f32[4,8] (shape (4, 8))") !=
        std::string::npos);
  err.clear();
  CHECK(run_child([&] { shm_load_npy_block(p.c_str(), nullptr, SHM_F64, 2, shape, start, bshape, out.data()); }, &err) ==
        2);
  CHECK(err.find("the file holds float32 but the program loads f64[8,4]") != std::string::npos);
  err.clear();
  CHECK(run_child([&] { shm_load_npy_block(p.c_str(), nullptr, SHM_F32, 2, shape, outside, bshape, out.data()); },
                  &err) == 2);
  CHECK(err.find("lies outside the array") != std::string::npos);
  err.clear();
  std::string z = path("arrays.npz");
  CHECK(run_child([&] { shm_load_npy_block(z.c_str(), "g", SHM_F32, 2, wrong, start, bshape, out.data()); }, &err) == 2);
  CHECK(err.find("shmap runtime error: " + z + ": key 'g': the member holds an array of shape (8, 4)") !=
        std::string::npos);
}

TEST_CASE("npy sharded: every device of a mesh loads its block, as shm_run_shmap splits inputs", "[npy][python]") {
  if (access("/usr/bin/python3", X_OK) != 0) return;
  const int64_t mesh[2] = {2, 2};
  const char *names[2] = {"x", "y"};
  g_sharded_shape[0] = 8;
  g_sharded_shape[1] = 4;
  struct Case {
    const char *file, *key;
    std::vector<int32_t> spec;  // the runtime's encoding (shmap_runtime.h)
  };
  std::vector<Case> cases = {
      {"blk_f32_8x4.npy", nullptr, {1, 0, 1, 1}},           // P("x", "y")
      {"blk_f32_8x4.npy", nullptr, {1, 1, 1, 0}},           // P("y", "x")
      {"blk_f32_8x4.npy", nullptr, {2, 1, 0, 0}},           // P(("y", "x"), None)
      {"blk_f32_8x4.npy", nullptr, {0, 2, 0, 1}},           // P(None, ("x", "y"))
      {"arrays.npz", "g", {1, 0, 1, 1}},                    // a stored member
      {"arrays_compressed.npz", "g", {2, 0, 1, 0}},         // a deflated member, P(("x", "y"))
  };
  for (const Case &c : cases) {
    INFO(c.file << " spec " << c.spec[0] << c.spec[1] << c.spec[2] << c.spec[3]);
    std::string p = path(c.file);
    g_sharded_path = p.c_str();
    g_sharded_key = c.key;
    g_sharded_spec = c.spec.data();
    std::vector<float> global(32, -100.0f);
    void *outs[1] = {global.data()};
    shm_array_desc out{2, g_sharded_shape, SHM_F32, c.spec.data(), 0};
    shm_run_shmap(2, mesh, names, shardedBody, 0, nullptr, nullptr, 1, outs, &out);
    checkValues(global, SHM_F32);
  }
  SECTION("a load with a spec outside a shmap body is refused") {
    std::string err, p = path("blk_f32_8x4.npy");
    const int32_t spec[4] = {1, 0, 0};
    std::vector<float> out(32);
    CHECK(run_child([&] { shm_load_npy_sharded(nullptr, p.c_str(), nullptr, SHM_F32, 2, g_sharded_shape, spec, out.data()); },
                    &err) == 2);
    CHECK(err.find("load with spec= outside a shmap body") != std::string::npos);
  }
}
