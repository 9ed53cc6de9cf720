// Output files nobody else can redirect (runtime/abi/safe_write.h), through the runtime's save and
// savez: a symbolic link planted where a temporary file could be named does not receive the
// write, devices and FIFOs are written in place and never replaced, a symbolic link to a
// regular file is written through, and what cannot be written is refused, naming the file.
#include "safe_write.h"
#include "shmap_runtime.h"

#include <catch2/catch.hpp>
#include "child.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <set>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

namespace {

// The folders made here, removed when the test program ends (not when a forked child, whose
// save fails with exit(2), does).
struct Folders {
  std::vector<std::string> made;
  pid_t owner = getpid();
  ~Folders() {
    if (getpid() != owner) return;
    for (const std::string &d : made) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
} g_folders;

std::string freshDir() {
  char tmpl[] = "/tmp/shmapc-safe-write-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  g_folders.made.push_back(tmpl);
  return tmpl;
}

std::string readAll(const std::string &path) {
  std::string out;
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return "<missing>";
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

void writeText(const std::string &path, const std::string &text) {
  FILE *f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

std::set<std::string> entries(const std::string &dir) {
  std::set<std::string> out;
  DIR *d = opendir(dir.c_str());
  REQUIRE(d);
  while (dirent *e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.insert(e->d_name);
  closedir(d);
  return out;
}

mode_t currentUmask() {
  mode_t m = umask(022);
  umask(m);
  return m;
}

const float kData[6] = {-3, -2.5f, -2, -1.5f, -1, -0.5f};
const int64_t kShape[2] = {2, 3};

void save(const std::string &path) { shm_save_npy(path.c_str(), SHM_F32, 2, kShape, kData); }

// The bytes of kData saved as a .npy file (saved once to a fresh file).
std::string savedBytes() {
  static std::string bytes;
  if (bytes.empty()) {
    std::string d = freshDir();
    save(d + "/ref.npy");
    bytes = readAll(d + "/ref.npy");
  }
  return bytes;
}

} // namespace

TEST_CASE("save: a symbolic link planted in the folder cannot redirect the write", "[save]") {
  const std::string d = freshDir(), out = d + "/w.npy", victim = d + "/victim";
  writeText(victim, "precious");
  // The temporary names the runtime once used (PATH.tmp-PID), and links at a few guesses.
  REQUIRE(symlink(victim.c_str(), (out + ".tmp-" + std::to_string((long)getpid())).c_str()) == 0);
  REQUIRE(symlink(victim.c_str(), (d + "/.w.npy.tmp-").c_str()) == 0);
  std::set<std::string> before = entries(d);
  save(out);
  CHECK(readAll(victim) == "precious");
  CHECK(readAll(out) == savedBytes());
  before.insert("w.npy");
  CHECK(entries(d) == before);  // no temporary file left behind, nothing else changed
  struct stat st;
  REQUIRE(lstat(out.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 0777) == (0666 & ~currentUmask()));  // the mode of any new file
}

TEST_CASE("safe_write: temporary files have unpredictable names, made afresh", "[save]") {
  const std::string d = freshDir(), out = d + "/x.bin";
  std::string error;
  safe_write::Output a, b;
  REQUIRE(a.open(out, false, error));
  REQUIRE(b.open(out, false, error));
  CHECK(a.temporaryPath() != b.temporaryPath());
  CHECK(a.temporaryPath().find(std::to_string((long)getpid())) == std::string::npos);
  CHECK(a.temporaryPath().rfind(d + "/.x.bin.tmp-", 0) == 0);
  a.abandon();
  b.abandon();
  CHECK(entries(d).empty());
  REQUIRE(safe_write::writeFile(out, "abc", 3, true, error));
  struct stat st;
  REQUIRE(stat(out.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == (0777 & ~currentUmask()));
}

TEST_CASE("save: a FIFO is written in place, and stays a FIFO", "[save]") {
  const std::string d = freshDir(), fifo = d + "/pipe";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  // The reader is open first (non-blocking), so the save's open finds it; the array is small
  // enough for the pipe's buffer.
  int rd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(rd >= 0);
  save(fifo);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = read(rd, buf, sizeof buf)) > 0) got.append(buf, (size_t)n);
  close(rd);
  CHECK(got == savedBytes());
  struct stat st;
  REQUIRE(lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(entries(d) == std::set<std::string>{"pipe"});
}

TEST_CASE("save: a link to a character device is written in place; neither is replaced", "[save]") {
  const std::string d = freshDir(), link = d + "/null";
  REQUIRE(symlink("/dev/null", link.c_str()) == 0);
  save(link);
  struct stat st;
  REQUIRE(lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  REQUIRE(stat(link.c_str(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  REQUIRE(stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(entries(d) == std::set<std::string>{"null"});
}

TEST_CASE("save: a symbolic link to a regular file is written through", "[save]") {
  const std::string d = freshDir(), target = d + "/real.npy", link = d + "/link.npy";
  writeText(target, "old contents");
  REQUIRE(symlink("real.npy", link.c_str()) == 0);  // relative, as ln -s makes them
  save(link);
  struct stat st;
  REQUIRE(lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(readAll(target) == savedBytes());
  CHECK(entries(d) == (std::set<std::string>{"link.npy", "real.npy"}));
}

TEST_CASE("save: what cannot be an output file is refused, naming it", "[save]") {
  const std::string d = freshDir();
  auto refused = [&](const std::string &path, const std::string &why) {
    std::string err;
    CHECK(run_child([&] { save(path); }, &err) == 2);
    INFO(err);
    CHECK(err.find("shmap runtime error: " + path + ": cannot write: " + why) != std::string::npos);
  };
  REQUIRE(mkdir((d + "/dir").c_str(), 0700) == 0);
  refused(d + "/dir", "it is a directory");
  REQUIRE(symlink((d + "/missing").c_str(), (d + "/dangling").c_str()) == 0);
  refused(d + "/dangling", "it is a symbolic link to a missing file");
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = d + "/sock";
  std::strncpy(addr.sun_path, sock.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(bind(s, (sockaddr *)&addr, sizeof addr) == 0);
  refused(sock, "it is a socket");
  close(s);
  refused(d + "/no_such_dir/w.npy", "No such file or directory");
  CHECK(entries(d) == (std::set<std::string>{"dir", "dangling", "sock"}));
}

TEST_CASE("savez: written the same way (a planted link at the old temporary name is ignored)", "[save]") {
  const std::string d = freshDir(), out = d + "/a.npz", victim = d + "/victim";
  writeText(victim, "precious");
  REQUIRE(symlink(victim.c_str(), (out + ".tmp-" + std::to_string((long)getpid())).c_str()) == 0);
  const char *keys[] = {"w"};
  const int32_t dtypes[] = {SHM_F32}, ranks[] = {2};
  const void *data[] = {kData};
  shm_save_npz(out.c_str(), 1, keys, dtypes, ranks, kShape, data);
  CHECK(readAll(victim) == "precious");
  std::vector<float> back(6);
  shm_load_npz(out.c_str(), "w", SHM_F32, 2, kShape, back.data());
  CHECK(std::memcmp(back.data(), kData, sizeof kData) == 0);
  CHECK(entries(d).size() == 3);
}
