// The start-up check of the CPU (runtime/cpu_check.cpp): its CPUID and XGETBV reading agrees
// with GCC's __builtin_cpu_supports on every feature GCC knows, SHMAP_PRETEND_CPU_LACKS makes
// features absent, and the refusal names the missing features and the level to use instead.
#include <catch2/catch.hpp>

#include "cpu_features.h"
#include "util.h"

#include <cstdlib>
#include <cstring>
#include <string>

using namespace shm;

namespace {

// Sets SHMAP_PRETEND_CPU_LACKS for one scope.
struct Pretend {
  explicit Pretend(const char *lacks) {
    if (lacks) setenv("SHMAP_PRETEND_CPU_LACKS", lacks, 1);
    else unsetenv("SHMAP_PRETEND_CPU_LACKS");
  }
  ~Pretend() { unsetenv("SHMAP_PRETEND_CPU_LACKS"); }
};

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

} // namespace

TEST_CASE("the CPU check reads CPUID as GCC's __builtin_cpu_supports does", "[cpu]") {
  Pretend none(nullptr);
  __builtin_cpu_init();
#define SAME(name)                                                                                 \
  do {                                                                                             \
    INFO(name);                                                                                    \
    CHECK(cpu_has(name) == (__builtin_cpu_supports(name) ? 1 : 0));                                \
  } while (0)
  SAME("sse3");
  SAME("ssse3");
  SAME("sse4.1");
  SAME("sse4.2");
  SAME("popcnt");
  SAME("avx");
  SAME("avx2");
  SAME("fma");
  SAME("f16c");
  SAME("bmi");
  SAME("bmi2");
  SAME("lzcnt");
  SAME("movbe");
  SAME("avx512f");
  SAME("avx512bw");
  SAME("avx512cd");
  SAME("avx512dq");
  SAME("avx512vl");
  SAME("avx512ifma");
  SAME("avx512vbmi");
  SAME("avx512vbmi2");
  SAME("avx512vnni");
  SAME("avx512bitalg");
  SAME("avx512vpopcntdq");
  SAME("avx512fp16");
  SAME("avx512bf16");
  SAME("avxvnni");
  SAME("gfni");
  SAME("sse4a");
  SAME("fma4");
  SAME("xop");
  SAME("tbm");
#undef SAME
  CHECK(cpu_has("no-such-feature") == -1);
  // a program compiled for the baseline needs nothing
  CHECK(cpu_check_problem("x86-64", "x86-64", "") == "");
}

TEST_CASE("every feature of the table has a distinct name and a valid CPUID place", "[cpu]") {
  for (const CpuFeature &f : kCpuFeatures) {
    INFO(f.name);
    CHECK(f.bit < 32);
    CHECK((f.leaf < 0x20 || (f.leaf >= 0x80000000u && f.leaf < 0x80000020u)));
    int same = 0;
    for (const CpuFeature &g : kCpuFeatures) same += std::strcmp(f.name, g.name) == 0;
    CHECK(same == 1);
  }
  for (const CpuLevel &l : kCpuLevels) {
    std::string adds = l.adds;
    for (size_t start = 0; start < adds.size();) {
      size_t end = adds.find(',', start);
      if (end == std::string::npos) end = adds.size();
      std::string name = adds.substr(start, end - start);
      INFO(l.name << ": " << name);
      CHECK(cpu_has(name.c_str()) != -1);
      start = end + 1;
    }
  }
}

TEST_CASE("SHMAP_PRETEND_CPU_LACKS makes features absent", "[cpu]") {
  {
    Pretend lacks("avx512f,avx2");
    CHECK(cpu_has("avx512f") == 0);
    CHECK(cpu_has("avx2") == 0);
    std::string why = cpu_check_problem("x86-64-v3", "x86-64-v3", "sse3,avx,avx2,fma");
    CHECK(contains(why, "this program was compiled for x86-64-v3 (--target-cpu) and needs avx2, which this CPU lacks"));
    // without AVX2 the highest level left is v2, whatever the CPU is
    CHECK(contains(why, "recompile with --target-cpu=native (for this machine) or --target-cpu=x86-64-v2 (for machines like it)"));
  }
  {
    Pretend lacks("all");
    for (const CpuFeature &f : kCpuFeatures) CHECK(cpu_has(f.name) == 0);
    // a program for the baseline needs none of them
    CHECK(cpu_check_problem("x86-64", "x86-64", "") == "");
    std::string why = cpu_check_problem("native", "sapphirerapids", "sse3,avx512f,avx512bw");
    CHECK(contains(why, "compiled for the CPU of the machine that compiled it, sapphirerapids (--target-cpu=native), "
                        "and needs sse3, avx512f, avx512bw, which this CPU lacks"));
    CHECK(contains(why, "--target-cpu=x86-64 (for machines like it)"));
  }
  {
    Pretend lacks("avx512f, sse3");  // spaces are separators too
    CHECK(cpu_has("sse3") == 0);
    CHECK(cpu_has("avx512f") == 0);
  }
  {
    Pretend lacks("avx512");  // not a feature name: an error, even when nothing is missing
    CHECK(contains(cpu_check_problem("x86-64", "x86-64", ""), "SHMAP_PRETEND_CPU_LACKS: unknown feature 'avx512'"));
  }
  {
    Pretend none(nullptr);
    // a feature this runtime does not know (a newer compiler's) cannot be checked: it passes
    CHECK(cpu_check_problem("x86-64", "x86-64", "avx-from-the-future") == "");
  }
}
