// The x86 instruction-set extensions a compiled program may need, by LLVM's feature names,
// with where CPUID reports each one. Shared by the compiler (compiler/codegen/Target.cpp:
// which of the features LLVM turns on for --target-cpu are embedded in the program) and the
// runtime (runtime/cpu_check.cpp: the start-up check that refuses to run on a CPU without
// them), so the two cannot disagree on a name.
//
// Listed: every extension LLVM's X86 code generator uses for ordinary code by itself, once
// the target has it (vector widths and instructions: SSE4, AVX, AVX-512, F16C, FP16, GFNI
// for bit reversal, ...; scalar ones: POPCNT, LZCNT, BMI, MOVBE, ...), as shmapc emits no
// target-specific intrinsics. Not listed, and not checked: the x86-64 baseline (SSE2 and
// older), which every x86-64 CPU has; and what nothing shmapc emits can use: extensions
// reached only through their intrinsics (crc32, aes, pclmul, sha, rdrnd, waitpkg, serialize,
// clzero, avxvnniint8, ...), which virtual machines often hide (a Sapphire Rapids guest
// without waitpkg must still run a program compiled for sapphirerapids), TSX, AMX and system
// extensions (xsave, fsgsbase, invpcid, ...).
// tests/unit/test_codegen.cpp lists every feature LLVM turns on for a known CPU that is not
// here, so a new one is a decision, not an accident.
#pragma once
#include <cstdint>

namespace shm {

enum CpuidReg : uint8_t { kEax, kEbx, kEcx, kEdx };

// Which register state the OS must enable (XCR0, read with xgetbv) for the extension's
// instructions to run: none, the AVX state (XMM and YMM), or the AVX-512 state (also the
// opmask registers and the upper ZMM registers).
enum CpuState : uint8_t { kNoState, kAvxState, kAvx512State };

struct CpuFeature {
  const char *name;  // LLVM's name, as in `-mattr=+name`
  uint32_t leaf, subleaf;
  CpuidReg reg;
  uint8_t bit;
  CpuState state;
};

inline constexpr CpuFeature kCpuFeatures[] = {
    // x86-64-v2
    {"sse3", 1, 0, kEcx, 0, kNoState},
    {"ssse3", 1, 0, kEcx, 9, kNoState},
    {"sse4.1", 1, 0, kEcx, 19, kNoState},
    {"sse4.2", 1, 0, kEcx, 20, kNoState},
    {"popcnt", 1, 0, kEcx, 23, kNoState},
    {"cx16", 1, 0, kEcx, 13, kNoState},
    {"sahf", 0x80000001, 0, kEcx, 0, kNoState},
    // x86-64-v3
    {"avx", 1, 0, kEcx, 28, kAvxState},
    {"avx2", 7, 0, kEbx, 5, kAvxState},
    {"fma", 1, 0, kEcx, 12, kAvxState},
    {"f16c", 1, 0, kEcx, 29, kAvxState},
    {"bmi", 7, 0, kEbx, 3, kNoState},
    {"bmi2", 7, 0, kEbx, 8, kNoState},
    {"lzcnt", 0x80000001, 0, kEcx, 5, kNoState},
    {"movbe", 1, 0, kEcx, 22, kNoState},
    // x86-64-v4
    {"avx512f", 7, 0, kEbx, 16, kAvx512State},
    {"avx512bw", 7, 0, kEbx, 30, kAvx512State},
    {"avx512cd", 7, 0, kEbx, 28, kAvx512State},
    {"avx512dq", 7, 0, kEbx, 17, kAvx512State},
    {"avx512vl", 7, 0, kEbx, 31, kAvx512State},
    // further AVX-512 and AVX extensions
    {"avx512ifma", 7, 0, kEbx, 21, kAvx512State},
    {"avx512vbmi", 7, 0, kEcx, 1, kAvx512State},
    {"avx512vbmi2", 7, 0, kEcx, 6, kAvx512State},
    {"avx512vnni", 7, 0, kEcx, 11, kAvx512State},
    {"avx512bitalg", 7, 0, kEcx, 12, kAvx512State},
    {"avx512vpopcntdq", 7, 0, kEcx, 14, kAvx512State},
    {"avx512fp16", 7, 0, kEdx, 23, kAvx512State},
    {"avx512bf16", 7, 1, kEax, 5, kAvx512State},
    {"avxvnni", 7, 1, kEax, 4, kAvxState},
    {"avxifma", 7, 1, kEax, 23, kAvxState},
    {"avxneconvert", 7, 1, kEdx, 5, kAvxState},
    {"gfni", 7, 0, kEcx, 8, kNoState},
    // AMD's
    {"sse4a", 0x80000001, 0, kEcx, 6, kNoState},
    {"fma4", 0x80000001, 0, kEcx, 16, kAvxState},
    {"xop", 0x80000001, 0, kEcx, 11, kAvxState},
    {"tbm", 0x80000001, 0, kEcx, 21, kNoState},
};

// The generic micro-architecture levels above x86-64, each with the listed features it adds
// to the one before (LLVM's definitions; tests/unit/test_codegen.cpp checks them against
// LLVM's): the runtime names the highest level a CPU has when it refuses to run a program.
struct CpuLevel {
  const char *name;
  const char *adds;  // comma-separated
};
inline constexpr CpuLevel kCpuLevels[] = {
    {"x86-64-v2", "sse3,ssse3,sse4.1,sse4.2,popcnt,cx16,sahf"},
    {"x86-64-v3", "avx,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe"},
    {"x86-64-v4", "avx512f,avx512bw,avx512cd,avx512dq,avx512vl"},
};

} // namespace shm
