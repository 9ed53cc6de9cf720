// The runtime's .npy reader and writer against files numpy writes and reads
// (tests/numpy/npy_fixtures.py): every layout numpy produces loads to the same values, and
// every bad file ends the program with `shmap runtime error: FILE: ...` and exit status 2.
#include "shmap_runtime.h"

#include <catch2/catch.hpp>
#include "child.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
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
    std::string here = __FILE__;
    std::string script = here.substr(0, here.rfind('/')) + "/../numpy/npy_fixtures.py";
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


// Loading `name` as f32 of `shape` fails with exit 2 and a message containing `what`.
void expectLoadError(const std::string &name, std::vector<int64_t> shape, const std::string &what,
                     int32_t dtype = SHM_F32) {
  std::string err, p = path(name);
  int status = run_child([&] {
    std::vector<double> out(64);
    shm_load_npy(p.c_str(), dtype, (int32_t)shape.size(), shape.data(), out.data());
  }, &err);
  INFO(name << ": " << err);
  CHECK(status == 2);
  CHECK(err.find("shmap runtime error: " + p + ": ") != std::string::npos);
  CHECK(err.find(what) != std::string::npos);
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
  std::string here = __FILE__;
  std::string script = here.substr(0, here.rfind('/')) + "/../numpy/npy_fixtures.py";
  CHECK(std::system(("/usr/bin/python3 " + script + " check " + d).c_str()) == 0);

  SECTION("a save that cannot write names the file and leaves nothing behind") {
    std::string err, p = d + "/no_such_dir/w.npy";
    CHECK(run_child([&] { shm_save_npy(p.c_str(), SHM_F32, 2, s23, f32.data()); }, &err) == 2);
    CHECK(err.find("shmap runtime error: " + p + ": cannot write") != std::string::npos);
  }
}
