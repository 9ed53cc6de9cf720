// The compiler's math functions (compiler/codegen/Math.h), compiled in-process for several
// x86-64 targets and optimisation levels and run here (LLVM's JIT):
//   - every target and level, inlined or called with vector variants, gives the same bits on
//     every input (the promise that a program
//     prints the same numbers wherever it was built; NaN results compare as NaN);
//   - the error against a reference (libm in double for f32, long double for f64) stays within
//     the bounds docs/numerics.md states, on special values, 2^18 random bit patterns and
//     uniform samples of the documented ranges.
// SHMAP_MATH_EXHAUSTIVE=1 also measures every f32 input of each range (minutes; the figures in
// docs/numerics.md come from it).
#include "codegen/Math.h"
#include "shmap_runtime.h"

#include <catch2/catch.hpp>

#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <thread>

namespace {

using namespace shmapc::codegen;

const char *const kFunctions[] = {"exp", "log", "sin", "cos", "tanh", "pow"};

bool hostHas(const char *feature) {
  return llvm::sys::getHostCPUFeatures().lookup(feature);
}

// The targets this machine can run: the x86-64 levels it supports, and the host itself.
std::vector<std::string> runnableCpus() {
  std::vector<std::string> cpus = {"x86-64"};
  if (hostHas("sse4.2") && hostHas("popcnt")) cpus.push_back("x86-64-v2");
  if (hostHas("avx2") && hostHas("fma") && hostHas("bmi2")) cpus.push_back("x86-64-v3");
  if (hostHas("avx512f") && hostHas("avx512bw") && hostHas("avx512dq") && hostHas("avx512vl"))
    cpus.push_back("x86-64-v4");
  cpus.push_back(llvm::sys::getHostCPUName().str());
  return cpus;
}

// One compiled set of loops: NAME_f32(x, [y,] out, n) and NAME_f64.
class Compiled {
public:
  Compiled(const std::string &cpu, int level, bool inlined) {
    static bool once = [] {
      llvm::InitializeNativeTarget();
      llvm::InitializeNativeTargetAsmPrinter();
      return true;
    }();
    (void)once;
    auto ctx = std::make_unique<llvm::LLVMContext>();
    auto m = std::make_unique<llvm::Module>("math", *ctx);
    for (const char *name : kFunctions)
      for (bool single : {true, false}) buildLoop(*m, name, single, inlined);
    std::string error;
    const std::string triple = llvm::sys::getDefaultTargetTriple();
    const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
    REQUIRE(target);
    llvm::TargetOptions options;
    options.AllowFPOpFusion = llvm::FPOpFusion::Strict;
    std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
        triple, cpu, cpu == llvm::sys::getHostCPUName() ? hostFeatures() : "", options, llvm::Reloc::PIC_,
        std::nullopt, level ? llvm::CodeGenOptLevel::Default : llvm::CodeGenOptLevel::None));
    REQUIRE(tm);
    m->setDataLayout(tm->createDataLayout());
    m->setTargetTriple(triple);
    optimize(*m, *tm, level);
    auto jtmb = llvm::orc::JITTargetMachineBuilder(llvm::Triple(triple));
    jtmb.setCPU(cpu);
    if (cpu == llvm::sys::getHostCPUName()) jtmb.addFeatures({hostFeatures()});
    jtmb.setCodeGenOptLevel(level ? llvm::CodeGenOptLevel::Default : llvm::CodeGenOptLevel::None);
    jtmb.getOptions().AllowFPOpFusion = llvm::FPOpFusion::Strict;
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create();
    if (!jit) FAIL(llvm::toString(jit.takeError()));
    jit_ = std::move(*jit);
    llvm::orc::MangleAndInterner mangle(jit_->getExecutionSession(), jit_->getDataLayout());
    llvm::orc::SymbolMap symbols;
    symbols[mangle("shm_rem_pio2")] = {llvm::orc::ExecutorAddr::fromPtr(&shm_rem_pio2), llvm::JITSymbolFlags::Exported};
    if (llvm::Error e = jit_->getMainJITDylib().define(llvm::orc::absoluteSymbols(symbols)))
      FAIL(llvm::toString(std::move(e)));
    if (llvm::Error e = jit_->addIRModule(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx))))
      FAIL(llvm::toString(std::move(e)));
  }

  template <class T> void run(const std::string &name, const std::vector<T> &x, const std::vector<T> &y,
                              std::vector<T> &out) {
    const std::string sym = name + (std::is_same_v<T, float> ? "_f32" : "_f64");
    auto addr = jit_->lookup(sym);
    if (!addr) FAIL(llvm::toString(addr.takeError()));
    out.assign(x.size(), 0);
    auto fn = addr->toPtr<void (*)(const T *, const T *, T *, int64_t)>();
    fn(x.data(), y.empty() ? x.data() : y.data(), out.data(), (int64_t)x.size());
  }

private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;

  static std::string hostFeatures() {
    std::string s;
    for (const auto &f : llvm::sys::getHostCPUFeatures()) s += (s.empty() ? "" : ",") + std::string(f.second ? "+" : "-") + f.first().str();
    return s;
  }

  static void buildLoop(llvm::Module &m, const std::string &name, bool single, bool inlined) {
    llvm::LLVMContext &ctx = m.getContext();
    llvm::Type *t = single ? llvm::Type::getFloatTy(ctx) : llvm::Type::getDoubleTy(ctx);
    llvm::Type *ptr = llvm::PointerType::get(ctx, 0), *i64 = llvm::Type::getInt64Ty(ctx);
    llvm::Function *f = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr, ptr, i64}, false),
                                               llvm::Function::ExternalLinkage, name + (single ? "_f32" : "_f64"), m);
    for (unsigned i = 0; i < 3; ++i) f->addParamAttr(i, llvm::Attribute::NoAlias);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx, "entry", f);
    llvm::BasicBlock *loop = llvm::BasicBlock::Create(ctx, "loop", f);
    llvm::BasicBlock *exit = llvm::BasicBlock::Create(ctx, "exit", f);
    llvm::IRBuilder<> b(entry);
    b.CreateCondBr(b.CreateICmpSGT(f->getArg(3), b.getInt64(0)), loop, exit);
    b.SetInsertPoint(loop);
    llvm::PHINode *i = b.CreatePHI(i64, 2);
    i->addIncoming(b.getInt64(0), entry);
    std::vector<llvm::Value *> args = {b.CreateLoad(t, b.CreateGEP(t, f->getArg(0), i))};
    if (name == "pow") args.push_back(b.CreateLoad(t, b.CreateGEP(t, f->getArg(1), i)));
    b.CreateStore(math::call(b, m, name, args, inlined), b.CreateGEP(t, f->getArg(2), i));
    llvm::Value *next = b.CreateAdd(i, b.getInt64(1));
    i->addIncoming(next, loop);
    b.CreateCondBr(b.CreateICmpSLT(next, f->getArg(3)), loop, exit);
    b.SetInsertPoint(exit);
    b.CreateRetVoid();
  }

  static void optimize(llvm::Module &m, llvm::TargetMachine &tm, int level) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(&tm);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = level ? pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2)
                                        : pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0);
    mpm.run(m, mam);
  }
};

// ---- references and errors

long double reference(const std::string &name, long double x, long double y) {
  if (name == "exp") return expl(x);
  if (name == "log") return logl(x);
  if (name == "sin") return sinl(x);
  if (name == "cos") return cosl(x);
  if (name == "tanh") return tanhl(x);
  return powl(x, y);
}

// In double (faster than long double; accurate to far below an f32 ulp).
double referenceDouble(const std::string &name, double x) {
  if (name == "exp") return std::exp(x);
  if (name == "log") return std::log(x);
  if (name == "sin") return std::sin(x);
  if (name == "cos") return std::cos(x);
  return std::tanh(x);
}

// |got - want| in units in the last place of T at want (the spacing of T's numbers there;
// subnormal spacing below the normal range). Infinite / NaN mismatches count as infinite.
template <class T> double ulpError(T got, long double want) {
  const T wantT = (T)want;
  if (std::isnan(want)) return std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(wantT) || std::isinf(got)) return wantT == got ? 0 : (std::isinf(got) && std::fabs(want) > (long double)std::numeric_limits<T>::max() ? 0 : INFINITY);
  if (std::isnan(got)) return INFINITY;
  int e;
  std::frexp((double)std::fabs(want), &e);  // |want| in [2^(e-1), 2^e)
  const int digits = std::numeric_limits<T>::digits;
  const int minExp = std::numeric_limits<T>::min_exponent;  // 2^(minExp-1) is the smallest normal
  const long double ulp = std::ldexp(1.0L, std::max(e, minExp) - digits);
  return (double)(std::fabs((long double)got - want) / ulp);
}

template <class T> bool sameBits(T a, T b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof a) == 0;
}

template <class T> T fromBits(uint64_t v) {
  T x;
  if constexpr (sizeof(T) == 4) {
    uint32_t u = (uint32_t)v;
    std::memcpy(&x, &u, 4);
  } else {
    std::memcpy(&x, &v, 8);
  }
  return x;
}

// Inputs for `name`: special values, random bit patterns, uniform samples of the ranges.
template <class T>
void inputs(const std::string &name, size_t n, std::vector<T> &x, std::vector<T> &y, uint64_t seed = 42) {
  std::mt19937_64 rng(seed);
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const T mx = std::numeric_limits<T>::max(), mn = std::numeric_limits<T>::min(),
          dn = std::numeric_limits<T>::denorm_min();
  std::vector<T> special = {0, -0.0, 1, -1, 0.5, 2, inf, -inf, nan, mx, -mx, mn, -mn, dn, -dn, (T)3.14159265358979,
                            (T)1.5707963267948966, (T)1e6, (T)-1e6, (T)1048576, (T)1e20, (T)-1e30, (T)88.72, (T)-103.9,
                            (T)709.7, (T)-745.1, (T)9, (T)-19, (T)0.625, (T)-0.625, (T)1e-8, (T)3, (T)-3, (T)0.1};
  x.clear();
  y.clear();
  for (T a : special)
    for (T b : name == "pow" ? special : std::vector<T>{0}) {
      x.push_back(a);
      y.push_back(b);
    }
  std::uniform_real_distribution<double> u(0, 1);
  auto range = [&](double lo, double hi) { return (T)(lo + (hi - lo) * u(rng)); };
  while (x.size() < n) {
    const size_t k = x.size() % 4;
    T a;
    if (k == 0) {
      a = fromBits<T>(rng());  // any value at all
    } else if (name == "exp") {
      a = range(sizeof(T) == 4 ? -104 : -746, sizeof(T) == 4 ? 89 : 710);
    } else if (name == "log" || name == "pow") {
      a = (T)std::exp(range(sizeof(T) == 4 ? -87 : -700, sizeof(T) == 4 ? 88 : 700));
    } else if (name == "tanh") {
      a = k == 1 ? range(-1, 1) : range(-20, 20);
    } else {
      a = k == 1 ? range(-10, 10) : k == 2 ? range(-1e4, 1e4) : range(-1e7, 1e7);
    }
    T b = k == 0 ? fromBits<T>(rng()) : k == 1 ? range(-30, 30) : (T)std::round(range(-40, 40));
    if (name == "pow" && k == 3) {  // a base near 1 and a power near overflow or underflow
      a = (T)std::exp(range(-0.35, 0.35));
      b = (T)(range(sizeof(T) == 4 ? -100 : -740, sizeof(T) == 4 ? 88 : 709) / std::log((double)a));
    }
    x.push_back(a);
    y.push_back(b);
  }
}

// docs/numerics.md's bounds, in ulp, over the documented ranges.
double bound(const std::string &name, bool single) {
  static const std::map<std::string, std::pair<double, double>> b = {
      {"exp", {1.0, 1.0}}, {"log", {1.0, 1.0}}, {"sin", {0.51, 1.0}}, {"cos", {0.51, 1.0}},
      {"tanh", {1.5, 1.5}}, {"pow", {0.51, 2.0}}};
  return single ? b.at(name).first : b.at(name).second;
}

template <class T> void checkFunction(std::vector<Compiled> &configs, const std::vector<std::string> &names,
                                      const std::string &fn, size_t n) {
  std::vector<T> x, y, first, out;
  inputs<T>(fn, n, x, y);
  configs[0].run(fn, x, y, first);
  for (size_t c = 1; c < configs.size(); ++c) {
    configs[c].run(fn, x, y, out);
    size_t differ = 0, firstDiff = 0;
    for (size_t i = 0; i < x.size(); ++i)
      if (!sameBits(first[i], out[i]) && differ++ == 0) firstDiff = i;
    INFO(fn << (sizeof(T) == 4 ? " f32" : " f64") << ": " << names[c] << " vs " << names[0] << ", first at x = "
            << x[firstDiff] << " y = " << y[firstDiff] << ": " << first[firstDiff] << " vs " << out[firstDiff]);
    CHECK(differ == 0);
  }
  double worst = 0;
  size_t worstAt = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    long double want = reference(fn, x[i], y[i]);
    double e = ulpError<T>(first[i], want);
    if (e > worst || std::isnan(e)) worst = e, worstAt = i;
  }
  INFO(fn << (sizeof(T) == 4 ? " f32" : " f64") << ": max error " << worst << " ulp at x = " << x[worstAt]
          << " y = " << y[worstAt] << ": got " << first[worstAt] << ", want "
          << (double)reference(fn, x[worstAt], y[worstAt]));
  CHECK(worst <= bound(fn, sizeof(T) == 4));
  WARN(fn << (sizeof(T) == 4 ? " f32" : " f64") << ": max error " << worst << " ulp");
}

} // namespace

TEST_CASE("math functions: the same bits on every x86-64 target and -O; errors within the documented bounds",
          "[math]") {
  std::vector<std::string> names;
  std::vector<Compiled> configs;
  for (const std::string &cpu : runnableCpus())
    for (int level : {2, 0})
      for (bool inlined : {true, false}) {
        const bool edge = cpu == "x86-64" || cpu == llvm::sys::getHostCPUName();
        if ((level == 0 || !inlined) && !edge) continue;
        names.push_back(cpu + " -O" + std::to_string(level) + (inlined ? "" : " (called)"));
        configs.emplace_back(cpu, level, inlined);
      }
  for (const char *fn : kFunctions) {
    checkFunction<float>(configs, names, fn, 1 << 18);
    checkFunction<double>(configs, names, fn, 1 << 18);
  }
}

// Hidden (run it by name: test_math "[.exhaustive]"): every f32 input of each function's range
// and 2^26 random inputs of each f64 range and of pow, against the references above, on all
// cores. It prints the table docs/numerics.md quotes.
TEST_CASE("math functions: every f32 input", "[.exhaustive]") {
  Compiled host(llvm::sys::getHostCPUName().str(), 2, true);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  struct Range {
    const char *fn;
    double lo, hi;  // inputs x with lo <= x <= hi
  };
  const Range ranges[] = {{"exp", -104, 89}, {"log", 0, INFINITY}, {"sin", -INFINITY, INFINITY},
                          {"cos", -INFINITY, INFINITY}, {"tanh", -INFINITY, INFINITY}};
  for (const Range &r : ranges) {
    std::vector<double> worst(threads, 0);
    std::vector<float> worstAt(threads, 0);
    std::vector<uint64_t> counted(threads, 0);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const uint64_t block = 1 << 16;
        std::vector<float> x, y, out;
        for (uint64_t start = t * block; start < (1ULL << 32); start += threads * block) {
          x.clear();
          for (uint64_t u = start; u < start + block; ++u) {
            float v = fromBits<float>(u);
            if (!std::isnan(v) && v >= r.lo && v <= r.hi) x.push_back(v);
          }
          if (x.empty()) continue;
          host.run(r.fn, x, y, out);
          for (size_t i = 0; i < x.size(); ++i) {
            const double want = referenceDouble(r.fn, x[i]);  // f32 ulps to ~1e-9
            const double e = ulpError<float>(out[i], want);
            if (e > worst[t]) worst[t] = e, worstAt[t] = x[i];
          }
          counted[t] += x.size();
        }
      });
    for (std::thread &th : pool) th.join();
    const size_t w = std::max_element(worst.begin(), worst.end()) - worst.begin();
    uint64_t total = 0;
    for (uint64_t c : counted) total += c;
    WARN(r.fn << " f32, all " << total << " inputs in [" << r.lo << ", " << r.hi << "]: max error " << worst[w]
              << " ulp at x = " << std::hexfloat << worstAt[w] << std::defaultfloat);
    CHECK(worst[w] <= bound(r.fn, true));
  }
  for (const char *fn : kFunctions)
    for (bool single : {false, true}) {
      if (single && std::string(fn) != "pow") continue;
      // 256 chunks of 2^18 inputs, chunk c from seed 1000 + c whichever thread takes it: the
      // same 2^26 inputs, and the same worst one, on every machine.
      const int chunks = (1 << 26) / (1 << 18);
      std::vector<double> worst(threads, 0), worstX(threads, 0), worstY(threads, 0);
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          auto check = [&](auto &x, auto &y, auto &out) {
            using T = typename std::decay_t<decltype(x)>::value_type;
            for (size_t i = 0; i < x.size(); ++i) {
              const double e = ulpError<T>(out[i], reference(fn, x[i], y[i]));
              if (e > worst[t]) worst[t] = e, worstX[t] = x[i], worstY[t] = y[i];
            }
          };
          for (int c = (int)t; c < chunks; c += (int)threads) {
            if (single) {
              std::vector<float> x, y, out;
              inputs<float>(fn, 1 << 18, x, y, 1000 + c);
              host.run(fn, x, y, out);
              check(x, y, out);
            } else {
              std::vector<double> x, y, out;
              inputs<double>(fn, 1 << 18, x, y, 1000 + c);
              host.run(fn, x, y, out);
              check(x, y, out);
            }
          }
        });
      for (std::thread &th : pool) th.join();
      const size_t w = std::max_element(worst.begin(), worst.end()) - worst.begin();
      WARN(fn << (single ? " f32" : " f64") << ", 2^26 random inputs: max error " << worst[w] << " ulp at x = "
              << std::hexfloat << worstX[w] << (std::string(fn) == "pow" ? ", y = " : "")
              << (std::string(fn) == "pow" ? worstY[w] : 0.0) << std::defaultfloat);
      CHECK(worst[w] <= bound(fn, single));
    }
}
