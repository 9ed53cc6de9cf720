// The start-up check of the CPU (docs/runtime.md, "Target CPU"): a program compiled for a
// CPU (shmapc --target-cpu) calls shm_check_cpu from a constructor that runs before anything
// else of the program, with the instruction-set extensions its code may use; on a CPU that
// lacks one, it stops with a message and exit status 2 instead of dying of SIGILL later.
//
// This file, like the whole runtime, is compiled for baseline x86-64: it must run on any CPU.
#include "cpu_features.h"
#include "shmap_runtime.h"
#include "util.h"

#include <cpuid.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace shm {

namespace {

struct CpuidResult {
  bool valid = false;
  uint32_t r[4] = {0, 0, 0, 0};
};

CpuidResult cpuid(uint32_t leaf, uint32_t subleaf) {
  CpuidResult c;
  const uint32_t maxLeaf = __get_cpuid_max(leaf & 0x80000000u, nullptr);
  if (maxLeaf < leaf) return c;
  __cpuid_count(leaf, subleaf, c.r[0], c.r[1], c.r[2], c.r[3]);
  c.valid = true;
  if (leaf == 7 && subleaf > 0) {  // leaf 7's last sub-leaf is 7.0's eax; later ones are not defined
    uint32_t last, b, cc, d;
    __cpuid_count(7, 0, last, b, cc, d);
    if (last < subleaf) c = CpuidResult{};
  }
  return c;
}

// The register state the OS saves and restores (XCR0), if it lets programs read it (OSXSAVE).
uint64_t enabledStates() {
  CpuidResult one = cpuid(1, 0);
  if (!one.valid || !(one.r[kEcx] & (1u << 27))) return 0;
  uint32_t lo, hi;
  // xgetbv by its bytes: the runtime is compiled without -mxsave
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

bool stateEnabled(CpuState s) {
  static const uint64_t xcr0 = enabledStates();
  const uint64_t avx = (1u << 1) | (1u << 2);                       // XMM, YMM
  const uint64_t avx512 = avx | (1u << 5) | (1u << 6) | (1u << 7);  // + opmask, ZMM_Hi256, Hi16_ZMM
  if (s == kAvxState) return (xcr0 & avx) == avx;
  if (s == kAvx512State) return (xcr0 & avx512) == avx512;
  return true;
}

const CpuFeature *findFeature(const std::string &name) {
  for (const CpuFeature &f : kCpuFeatures)
    if (name == f.name) return &f;
  return nullptr;
}

std::vector<std::string> splitList(const char *text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char *p = text ? text : ""; ; ++p) {
    if (*p == ',' || *p == ' ' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

// SHMAP_PRETEND_CPU_LACKS=avx512f,avx2 (or `all`): a testing aid that makes the check treat
// the named features as absent, to see a program refused without a CPU that lacks them.
bool pretendLacks(const char *feature, std::string &error) {
  const char *env = std::getenv("SHMAP_PRETEND_CPU_LACKS");
  if (!env) return false;
  bool lacks = false;
  for (const std::string &name : splitList(env)) {
    if (name == "all" || name == feature) lacks = true;
    else if (!findFeature(name) && error.empty())
      error = "SHMAP_PRETEND_CPU_LACKS: unknown feature '" + name +
              "' (the names are LLVM's, as in --target-cpu's features: avx2, avx512f, ...; or all)";
  }
  return lacks;
}

bool hasFeature(const CpuFeature &f, std::string &error) {
  if (pretendLacks(f.name, error)) return false;
  CpuidResult c = cpuid(f.leaf, f.subleaf);
  return c.valid && (c.r[f.reg] >> f.bit & 1u) && stateEnabled(f.state);
}

} // namespace

int cpu_has(const char *feature) {
  std::string error;
  const CpuFeature *f = findFeature(feature);
  if (!f) return -1;
  return hasFeature(*f, error) ? 1 : 0;
}

std::string cpu_check_problem(const char *target, const char *cpu, const char *features) {
  std::string error, missing;
  for (const std::string &name : splitList(features)) {
    const CpuFeature *f = findFeature(name);
    if (!f) continue;  // (a shmapc newer than this runtime: it cannot check what it does not know)
    if (!hasFeature(*f, error)) missing += (missing.empty() ? "" : ", ") + name;
  }
  pretendLacks("", error);  // an unknown name in the variable is an error even when nothing is missing
  if (!error.empty()) return error;
  if (missing.empty()) return "";
  // The highest generic level this CPU has, for a program that runs on machines like it.
  const char *level = "x86-64";
  for (const CpuLevel &l : kCpuLevels) {
    bool all = true;
    for (const std::string &name : splitList(l.adds)) {
      const CpuFeature *f = findFeature(name);
      all = all && f && hasFeature(*f, error);
    }
    if (!all) break;
    level = l.name;
  }
  const std::string compiledFor =
      std::strcmp(target, "native") == 0
          ? std::string("the CPU of the machine that compiled it, ") + cpu + " (--target-cpu=native),"
          : std::string(cpu) + " (--target-cpu)";
  return "this program was compiled for " + compiledFor + " and needs " + missing +
         ", which this CPU lacks; recompile with --target-cpu=native (for this machine) or --target-cpu=" + level +
         " (for machines like it)";
}

} // namespace shm

extern "C" void shm_check_cpu(const char *target, const char *cpu, const char *features) {
  SHM_GUARD_BEGIN
  std::string problem = shm::cpu_check_problem(target, cpu, features);
  if (problem.empty()) return;
  // Before main: no device threads, no MPI yet (shm_fatal would abort an MPI job), no output.
  std::fprintf(stderr, "shmap runtime error: %s\n", problem.c_str());
  std::fflush(stderr);
  std::_Exit(2);
  SHM_GUARD_END("shm_check_cpu")
}
