// How a run ends when a device fails or a collective waits too long (runtime/sync.h): the
// other devices stop before the process exits, so no sanitizer sees a device read memory that
// exit() frees; the output printed before stays; the watchdog names where each member is.
//
// Each case runs this test executable again (posix_spawn, so also under ThreadSanitizer, which
// does not support forking a multi-threaded process) with a hidden case that ends the process,
// and checks its status, its output and that no sanitizer reported anything.
#include <catch2/catch.hpp>

#include "shmap_runtime.h"

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace {

struct Child {
  int status = -1;  // exit status, -1 if killed by a signal
  std::string out, err;
};

std::string slurp(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs this executable's hidden test case `name` with `env` ("NAME=value") added.
Child run_case(const std::string &name, const std::vector<std::string> &env = {}) {
  char dir[] = "/tmp/shmap_stop_XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string out = std::string(dir) + "/out", err = std::string(dir) + "/err";
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&files, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> vars(env);
  for (char **e = environ; *e; ++e) vars.push_back(*e);
  std::vector<char *> envp;
  for (std::string &v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", test = name;
  char *argv[] = {exe.data(), test.data(), nullptr};
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, exe.c_str(), &files, nullptr, argv, envp.data()) == 0);
  posix_spawn_file_actions_destroy(&files);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  Child c;
  c.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  c.out = slurp(out);
  c.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  rmdir(dir);
  return c;
}

bool sanitizer_spoke(const std::string &err) {
  return err.find("Sanitizer") != std::string::npos || err.find("SUMMARY:") != std::string::npos;
}

// Read by every device on every step, and freed by exit() (as a compiled program's arguments
// are): a device still running when the process exits reads freed memory.
std::vector<float> g_table(1 << 14, 1.0f);

float read_table() {
  float s = 0;
  for (float v : g_table) s += v;
  return s;
}

// A mesh x=2, y=2. Device (1, 0) looks up index 7 of an axis of 4 after its first collective
// (a run-time error); the group x = 0 goes on with 200 psums over "y", reading g_table between
// them, and device (1, 1) waits for (1, 0) at its second psum.
void failing_body(shm_device *dev, void **, void **) {
  const int32_t x = 0, y = 1;
  const int32_t ix = shm_axis_index(dev, &x, 1), iy = shm_axis_index(dev, &y, 1);
  float a = read_table(), b = 0;
  shm_psum(dev, SHM_F32, &a, &b, 0, nullptr, &y, 1);
  if (ix == 1 && iy == 0) {
    const float table[4] = {1, 2, 3, 4};
    const int32_t idx = 7;
    float out = 0;
    shm_gather(SHM_F32, table, 1, 4, 1, &idx, 1, &out);
  }
  for (int i = 0; i < 200; ++i) {
    a = read_table();
    shm_psum(dev, SHM_F32, &a, &b, 0, nullptr, &y, 1);
  }
}

// What emitted code does before each collective call (shmap_runtime.h): the collective's source
// location into the device's first word.
void at(shm_device *dev, const char *loc) { *reinterpret_cast<const char **>(dev) = loc; }

// Device (1, 0) skips the third collective over "y", a psum that device (1, 1) runs. The first
// and third are given a location; the second (a pmax) none, so it must not show the first's.
void mismatched_body(shm_device *dev, void **, void **) {
  const int32_t x = 0, y = 1;
  const int32_t ix = shm_axis_index(dev, &x, 1), iy = shm_axis_index(dev, &y, 1);
  float a = 1, b = 0;
  at(dev, "hand.smp:4:11");
  shm_psum(dev, SHM_F32, &a, &b, 0, nullptr, &y, 1);
  shm_pmax(dev, SHM_F32, &a, &b, 0, nullptr, &y, 1);
  if (ix == 1 && iy == 0) return;
  const int64_t shape[1] = {3};
  float v[3] = {1, 2, 3}, w[3];
  at(dev, "hand.smp:12:5");
  shm_psum(dev, SHM_F32, v, w, 1, shape, &y, 1);
}

void run_mesh(shm_fn body) {
  const int64_t mesh[2] = {2, 2};
  const char *const names[2] = {"x", "y"};
  shm_run_shmap(2, mesh, names, body, 0, nullptr, nullptr, 0, nullptr, nullptr);
}

} // namespace

TEST_CASE("stop child: a device fails mid-run", "[.stop-child]") {
  std::printf("printed before the failure\n");  // (buffered: the failure must flush it)
  run_mesh(failing_body);
}

TEST_CASE("stop child: a member skips a collective", "[.stop-child]") { run_mesh(mismatched_body); }

TEST_CASE("stop child: a bad collective timeout", "[.stop-child]") {
  const int64_t mesh[1] = {2};
  shm_run_shmap(1, mesh, nullptr, [](shm_device *dev, void **, void **) {
    float a = 1, b;
    const int32_t axis = 0;
    shm_psum(dev, SHM_F32, &a, &b, 0, nullptr, &axis, 1);
  }, 0, nullptr, nullptr, 0, nullptr, nullptr);
}

TEST_CASE("a device that fails stops the others before the process exits", "[stop]") {
  const Child c = run_case("stop child: a device fails mid-run");
  INFO("stdout:\n" << c.out << "stderr:\n" << c.err);
  CHECK(c.status == 2);
  CHECK(c.err.find("shmap runtime error: take: index 7 is out of range for an axis of size 4\n") != std::string::npos);
  CHECK(c.out.find("printed before the failure\n") != std::string::npos);
  CHECK(!sanitizer_spoke(c.err));
}

TEST_CASE("a collective that waits past SHMAP_COLLECTIVE_TIMEOUT ends the run with a report", "[stop]") {
  const Child c = run_case("stop child: a member skips a collective", {"SHMAP_COLLECTIVE_TIMEOUT=1"});
  INFO("stdout:\n" << c.out << "stderr:\n" << c.err);
  CHECK(c.status == 2);
  CHECK(c.err.find("shmap runtime error: a collective has waited ") != std::string::npos);
  CHECK(c.err.find("more than SHMAP_COLLECTIVE_TIMEOUT=1 s: device 3 (x=1,y=1) waits in psum over \"y\" of f32[3] "
                   "at hand.smp:12:5 (its collective #3), for the group of 2 devices:\n") != std::string::npos);
  CHECK(c.err.find("\n  device 2 (x=1,y=0): has not arrived: its shmap body has returned; the last collective it "
                   "completed is pmax over \"y\" of f32[] (its collective #2)\n") != std::string::npos);
  CHECK(c.err.find("\n  device 3 (x=1,y=1): waits in psum over \"y\" of f32[3] at hand.smp:12:5 (its collective "
                   "#3)\n") != std::string::npos);
  CHECK(!sanitizer_spoke(c.err));
}

TEST_CASE("SHMAP_COLLECTIVE_TIMEOUT must be a number of seconds above 0", "[stop]") {
  // The message is env.cpp's, as for every SHMAP_* variable (runtime_main prefixes it with the
  // program's name; here, started without it, the host's refusal says "shmap runtime error").
  for (const char *bad : {"abc", "0", "-1", "2s", "nan", "inf", "1e999"}) {
    const Child c = run_case("stop child: a bad collective timeout", {std::string("SHMAP_COLLECTIVE_TIMEOUT=") + bad});
    INFO("value '" << bad << "'\nstderr:\n" << c.err);
    CHECK(c.status == 2);
    CHECK(c.err.find(std::string("shmap runtime error: SHMAP_COLLECTIVE_TIMEOUT='") + bad +
                     "' is not a value it takes: SHMAP_COLLECTIVE_TIMEOUT is a number of seconds above 0") !=
          std::string::npos);
  }
  // Empty is unset (the default), as for the other SHMAP_* variables.
  for (const char *good : {"", "0.5", "30"}) {
    const Child c = run_case("stop child: a bad collective timeout", {std::string("SHMAP_COLLECTIVE_TIMEOUT=") + good});
    INFO("value '" << good << "'\nstderr:\n" << c.err);
    CHECK(c.status == 0);
    CHECK(c.err.empty());
  }
}
