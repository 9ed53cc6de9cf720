// Code generator tests: hand-built IR modules are emitted, verified, optimized at -O0 and -O2,
// compiled to object files, linked against the runtime and run; stdout is compared exactly.
// Programs that need runtime entry points not yet in the archive are only compiled (a WARN
// says which were skipped).
#include "codegen/Codegen.h"
#include "ir/IR.h"
#include "rules/Rules.h"

#include <catch2/catch.hpp>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/X86TargetParser.h>

#include "cpu_features.h"
#include "half.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <unistd.h>

using namespace shmapc;
using ir::DType;
using ir::Prim;

namespace {

ir::Type T(DType d, std::vector<int64_t> shape, ir::AxisSet vary = 0) {
  ir::Type t;
  t.dtype = d;
  t.shape = std::move(shape);
  t.vary = vary;
  return t;
}

// Appends eqns to one Func.
struct FB {
  ir::Func *f;
  ir::Value *param(const ir::Type &t) {
    ir::Value *v = f->newValue(t);
    f->params.push_back(v);
    return v;
  }
  std::vector<ir::Value *> eqn(Prim p, std::vector<ir::Value *> ins, std::vector<ir::Type> outs,
                               std::map<std::string, ir::Attr> params = {},
                               std::vector<ir::Func *> bodies = {}) {
    ir::Eqn e;
    e.prim = p;
    e.ins = std::move(ins);
    for (const ir::Type &t : outs) e.outs.push_back(f->newValue(t));
    e.params = std::move(params);
    e.bodies = std::move(bodies);
    f->eqns.push_back(e);
    return f->eqns.back().outs;
  }
  ir::Value *op(Prim p, std::vector<ir::Value *> ins, const ir::Type &out,
                std::map<std::string, ir::Attr> params = {}) {
    return eqn(p, std::move(ins), {out}, std::move(params))[0];
  }
  ir::Value *constant(const ir::Type &t, std::vector<double> values) {
    return op(Prim::Constant, {}, t, {{"value", values}});
  }
  void print(const std::string &label, ir::Value *v) {
    eqn(Prim::Print, {v}, {}, {{"label", label}});
  }
  void ret(std::vector<ir::Value *> vs) { f->results = std::move(vs); }
};

FB newFunc(ir::Module &m, const std::string &name, bool isMain = false) {
  ir::Func *f = m.newFunc(name);
  if (isMain) m.main = f;
  return FB{f};
}

std::string tempDir() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/test_codegen.XXXXXX";
    const char *d = mkdtemp(tmpl);
    return std::string(d ? d : "/tmp");
  }();
  return dir;
}

std::string runCommand(const std::string &cmd, int &status) {
  std::string out;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) {
    status = -1;
    return out;
  }
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  status = pclose(p);
  return out;
}

// Whether the runtime archive defines every symbol (the runtime is written concurrently).
bool runtimeHas(const std::vector<std::string> &symbols) {
  static std::set<std::string> defined = [] {
    std::set<std::string> s;
    int status;
    std::string out = runCommand("nm -g --defined-only " SHMAP_RUNTIME_LIB " 2>/dev/null", status);
    size_t pos = 0;
    while (pos < out.size()) {
      size_t end = out.find('\n', pos);
      if (end == std::string::npos) end = out.size();
      std::string line = out.substr(pos, end - pos);
      size_t sp = line.rfind(' ');
      if (sp != std::string::npos) s.insert(line.substr(sp + 1));
      pos = end + 1;
    }
    return s;
  }();
  for (const std::string &sym : symbols)
    if (!defined.count(sym)) return false;
  return true;
}

struct Compiled {
  std::string error;
  std::string ir;  // textual LLVM IR after optimization
  std::string object;
};

Compiled compile(const ir::Module &m, int level, const std::string &name) {
  Compiled c;
  std::vector<std::string> problems = rules::verifyModule(m);  // shape rules too
  for (const std::string &p : problems) c.error += "IR verifier: " + p + "\n";
  if (!c.error.empty()) return c;
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> lm = codegen::emitLLVM(m, ctx, c.error);
  if (!lm) return c;
  if (!codegen::optimize(*lm, level, c.error)) return c;
  c.ir = codegen::printLLVM(*lm);
  if (std::getenv("SHMAPC_TEST_DUMP"))  // for debugging: keep the optimized IR next to the .o
    std::ofstream(tempDir() + "/" + name + ".O" + std::to_string(level) + ".ll") << c.ir;
  c.object = tempDir() + "/" + name + ".O" + std::to_string(level) + ".o";
  std::string bytes;
  if (!codegen::emitObjectCode(*lm, level, false, bytes, c.error)) c.object.clear();
  else if (!(std::ofstream(c.object, std::ios::binary) << bytes)) c.error = "cannot write " + c.object, c.object.clear();
  return c;
}

// Links and runs; returns stdout (and the exit status through `status`).
std::string linkAndRun(const std::string &object, int &status) {
  std::string exe = object + ".exe";
  std::string link = "g++ " + object + " " SHMAP_RUNTIME_LIB " " SHMAPC_BLAS_LIB " " SHMAPC_DNNL_LIB " " SHMAPC_ZLIB_LIB
                     " -lgomp -lpthread -lmvec -lm -o " + exe + " 2>&1";
  std::string linkOut = runCommand(link, status);
  if (status != 0) return "LINK FAILED: " + linkOut;
  return runCommand(exe + " 2>&1", status);
}

// Compiles at -O0 and -O2; when the runtime has `needs`, runs both and checks stdout.
void check(const ir::Module &m, const std::string &name, const std::vector<std::string> &needs,
           const std::string &expected) {
  for (int level : {0, 2}) {
    INFO(name << " at -O" << level);
    Compiled c = compile(m, level, name);
    REQUIRE(c.error == "");
    REQUIRE(!c.object.empty());
    if (!runtimeHas(needs)) {
      WARN(name << ": not run (the runtime lacks some of its entry points yet)");
      continue;
    }
    int status = 0;
    std::string out = linkAndRun(c.object, status);
    CHECK(out == expected);
    CHECK(status == 0);
  }
}

} // namespace

TEST_CASE("element-wise chain fuses into one vectorized loop", "[codegen]") {
  ir::Module m;
  FB f = newFunc(m, "main", true);
  ir::Type t = T(DType::F32, {1024});
  ir::Value *x = f.op(Prim::Iota, {}, t, {{"dimension", int64_t(0)}});
  ir::Value *two = f.constant(t, {2.0});
  ir::Value *y = f.op(Prim::Add, {x, two}, t);
  ir::Value *z = f.op(Prim::Mul, {y, y}, t);
  ir::Value *s = f.op(Prim::ReduceMax, {z}, T(DType::F32, {}), {{"axes", std::vector<int64_t>{0}}});
  f.print("s", s);

  Compiled o2 = compile(m, 2, "chain");
  REQUIRE(o2.error == "");
  bool vectorized = o2.ir.find("fadd <4 x float>") != std::string::npos ||
                    o2.ir.find("fadd <8 x float>") != std::string::npos ||
                    o2.ir.find("fadd <16 x float>") != std::string::npos;
  CHECK(vectorized);
  // Fusion: the splat and the intermediate y need no buffers; x dies in the loop that computes
  // z, so z is written in place over x's 4 KiB, the function's one allocation, its arena.
  llvm::LLVMContext ctx;
  std::string err;
  std::unique_ptr<llvm::Module> lm = codegen::emitLLVM(m, ctx, err);
  REQUIRE(lm);
  std::string o0 = codegen::printLLVM(*lm);
  size_t allocs = 0;
  for (size_t p = o0.find("call ptr @shm_alloc"); p != std::string::npos;
       p = o0.find("call ptr @shm_alloc", p + 1))
    ++allocs;
  CHECK(allocs == 1);
  CHECK(o0.find("call ptr @shm_alloc(i64 4096)") != std::string::npos);
  CHECK(o0.find("@shm_reduce") != std::string::npos);
  CHECK(o0.find("@shm_print") != std::string::npos);
  // max over i < 1024 of (i + 2)^2 = 1025^2
  check(m, "chain", {"shm_iota", "shm_reduce", "shm_print"}, "s: f32[] = 1.05062e+06\n");
}

TEST_CASE("the arena: values whose spans do not overlap share bytes", "[codegen]") {
  // x -> t1 -> t2 -> t3, each a 4 KiB transpose of the last: x is dead once t1 exists, so t2
  // takes x's bytes and t3 t1's. 8 KiB in all, where a buffer each would take 16 KiB.
  ir::Module m;
  FB f = newFunc(m, "main", true);
  ir::Type t = T(DType::F32, {32, 32});
  std::vector<int64_t> perm{1, 0};
  ir::Value *x = f.op(Prim::Iota, {}, t, {{"dimension", int64_t(1)}});
  ir::Value *t1 = f.op(Prim::Transpose, {x}, t, {{"permutation", perm}});
  ir::Value *t2 = f.op(Prim::Transpose, {t1}, t, {{"permutation", perm}});
  ir::Value *t3 = f.op(Prim::Transpose, {t2}, t, {{"permutation", perm}});
  f.print("row 0", f.op(Prim::Slice, {t3}, T(DType::F32, {1, 4}),
                        {{"start", std::vector<int64_t>{0, 0}},
                         {"limit", std::vector<int64_t>{1, 4}},
                         {"strides", std::vector<int64_t>{1, 1}}}));
  llvm::LLVMContext ctx;
  std::string err;
  std::unique_ptr<llvm::Module> lm = codegen::emitLLVM(m, ctx, err);
  REQUIRE(lm);
  std::string o0 = codegen::printLLVM(*lm);
  CHECK(o0.find("call ptr @shm_alloc(i64 8192)") != std::string::npos);
  // transposed three times: column j of iota along dim 1 holds j, so row 0 is all zeros
  check(m, "arena", {"shm_iota", "shm_transpose", "shm_slice", "shm_print"}, "row 0: f32[1,4]\n[[0, 0, 0, 0]]\n");
}

TEST_CASE("element-wise arithmetic, compares, select, convert", "[codegen]") {
  ir::Module m;
  FB f = newFunc(m, "main", true);
  ir::Type i4 = T(DType::I32, {4}), f4 = T(DType::F32, {4}), b4 = T(DType::Bool, {4});
  ir::Value *a = f.constant(i4, {7, -7, 5, -2147483648.0});
  ir::Value *d = f.constant(i4, {2, 2, 0, -1});
  f.print("div", f.op(Prim::Div, {a, d}, i4));
  f.print("rem", f.op(Prim::Rem, {a, d}, i4));
  ir::Value *x = f.constant(f4, {1.5, -2.5, 3e10, 0.0});
  f.print("toint", f.op(Prim::Convert, {x}, i4));
  f.print("tobool", f.op(Prim::Convert, {x}, b4));
  ir::Value *lt = f.op(Prim::Lt, {x, f.constant(f4, {0.0})}, b4);
  f.print("lt", lt);
  f.print("sel", f.op(Prim::Select, {lt, f.op(Prim::Neg, {x}, f4), x}, f4));
  f.print("max", f.op(Prim::Max, {a, d}, i4));
  f.print("abs", f.op(Prim::Abs, {x}, f4));
  ir::Value *sc = f.constant(T(DType::F64, {}), {2.0});
  f.print("sqrt", f.op(Prim::Sqrt, {sc}, T(DType::F64, {})));
  f.print("not", f.op(Prim::Not, {lt}, b4));
  // numpy semantics: floor division, remainders with the divisor's sign, NaN-propagating
  // maximum / minimum (either side), floor_divide snapped as numpy's (1 // 0.1 is 9).
  ir::Value *p = f.constant(f4, {-7.5, 7.5, 1.0, -1.0});
  ir::Value *q = f.constant(f4, {2.0, -2.0, 0.1, 0.0});
  f.print("frem", f.op(Prim::Rem, {p, q}, f4));
  f.print("ffloordiv", f.op(Prim::FloorDiv, {p, q}, f4));
  f.print("ifloordiv", f.op(Prim::FloorDiv, {a, d}, i4));
  f.print("floor", f.op(Prim::Floor, {p}, f4));
  ir::Value *nan = f.op(Prim::Div, {f.constant(f4, {0.0}), f.constant(f4, {0.0})}, f4);
  f.print("fmax", f.op(Prim::Max, {nan, p}, f4));
  f.print("fmin", f.op(Prim::Min, {p, nan}, f4));
  check(m, "arith", {"shm_print"},
        "div: i32[4]\n[3, -4, 0, -2147483648]\n"
        "rem: i32[4]\n[1, 1, 0, 0]\n"
        "toint: i32[4]\n[1, -2, 2147483647, 0]\n"
        "tobool: bool[4]\n[true, true, true, false]\n"
        "lt: bool[4]\n[false, true, false, false]\n"
        "sel: f32[4]\n[1.5, 2.5, 3e+10, 0]\n"
        "max: i32[4]\n[7, 2, 5, -1]\n"
        "abs: f32[4]\n[1.5, 2.5, 3e+10, 0]\n"
        "sqrt: f64[] = 1.41421\n"
        "not: bool[4]\n[true, false, true, true]\n"
        "frem: f32[4]\n[0.5, -0.5, 0.1, nan]\n"
        "ffloordiv: f32[4]\n[-4, -4, 9, -inf]\n"
        "ifloordiv: i32[4]\n[3, -4, 0, -2147483648]\n"
        "floor: f32[4]\n[-8, 7, 1, -1]\n"
        "fmax: f32[4]\n[nan, nan, nan, nan]\n"
        "fmin: f32[4]\n[nan, nan, nan, nan]\n");
}

TEST_CASE("call, cond and loop", "[codegen]") {
  ir::Module m;
  ir::Type s = T(DType::F32, {}), v3 = T(DType::F32, {3}), i = T(DType::I32, {});

  FB twice = newFunc(m, "twice");  // twice(a) = (a + a, a, a + a): a param and a repeat
  ir::Value *a = twice.param(v3);
  ir::Value *aa = twice.op(Prim::Add, {a, a}, v3);
  twice.ret({aa, a, aa});

  FB yes = newFunc(m, "cond_true");
  yes.f->isNested = true;
  ir::Value *ya = yes.param(s);
  yes.ret({yes.op(Prim::Add, {ya, yes.constant(s, {1})}, s)});
  FB no = newFunc(m, "cond_false");
  no.f->isNested = true;
  no.ret({no.param(s)});

  // loop body: (i, c: f32[], acc: f32[], vec: f32[3]) -> (acc + f32(i) * c, vec + acc)
  FB body = newFunc(m, "loop_body");
  body.f->isNested = true;
  ir::Value *bi = body.param(i), *bc = body.param(s), *bacc = body.param(s), *bvec = body.param(v3);
  ir::Value *fi = body.op(Prim::Convert, {bi}, s);
  ir::Value *nacc = body.op(Prim::Add, {bacc, body.op(Prim::Mul, {fi, bc}, s)}, s);
  ir::Value *bb = body.op(Prim::BroadcastInDim, {bacc}, v3,
                          {{"broadcast_dimensions", std::vector<int64_t>{}}});
  body.ret({nacc, body.op(Prim::Add, {bvec, bb}, v3)});

  FB mf = newFunc(m, "main", true);
  ir::Value *x = mf.op(Prim::Iota, {}, v3, {{"dimension", int64_t(0)}});
  auto r = mf.eqn(Prim::Call, {x}, {v3, v3, v3}, {}, {twice.f});
  mf.print("twice", r[0]);
  mf.print("same", r[1]);
  mf.print("again", r[2]);
  for (double p : {1.0, 0.0}) {
    ir::Value *pred = mf.constant(T(DType::Bool, {}), {p});
    auto c = mf.eqn(Prim::Cond, {pred, mf.constant(s, {5})}, {s}, {}, {yes.f, no.f});
    mf.print("cond", c[0]);
  }
  // lo..hi with an odd, an even and a zero trip count (the carry double-buffering parity).
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 5}, {2, 6}, {3, 3}}) {
    auto l = mf.eqn(Prim::Loop, {mf.constant(s, {2}), mf.constant(s, {0}), mf.constant(v3, {1})},
                    {s, v3}, {{"lo", lo}, {"hi", hi}, {"num_consts", int64_t(1)}}, {body.f});
    mf.print("acc", l[0]);
    mf.print("vec", l[1]);
  }
  check(m, "control", {"shm_iota", "shm_print"},
        "twice: f32[3]\n[0, 2, 4]\n"
        "same: f32[3]\n[0, 1, 2]\n"
        "again: f32[3]\n[0, 2, 4]\n"
        "cond: f32[] = 6\n"
        "cond: f32[] = 5\n"
        // 0..5: acc = 2*(0+1+2+3+4) = 20; vec = 1 + (0 + 0 + 2 + 6 + 12) = 21
        "acc: f32[] = 20\nvec: f32[3]\n[21, 21, 21]\n"
        // 2..6: acc = 2*(2+3+4+5) = 28; vec = 1 + (0 + 4 + 10 + 18) = 33
        "acc: f32[] = 28\nvec: f32[3]\n[33, 33, 33]\n"
        "acc: f32[] = 0\nvec: f32[3]\n[1, 1, 1]\n");
}

TEST_CASE("shmap with collectives over a 2x2 mesh", "[codegen]") {
  ir::Module m;
  auto mesh = std::make_unique<ir::Mesh>();
  mesh->name = "xy";
  mesh->axes = {"x", "y"};
  mesh->sizes = {2, 2};
  const ir::Mesh *mp = mesh.get();
  m.meshes.push_back(std::move(mesh));

  ir::AxisSet xy = 3;
  FB body = newFunc(m, "body");
  body.f->mesh = mp;
  body.f->isShmapBody = true;
  ir::Value *blk = body.param(T(DType::F32, {2, 2}, xy));
  // pbroadcast between element-wise ops does not split the fused loop
  ir::Value *one = body.op(Prim::Pbroadcast, {body.constant(T(DType::F32, {2, 2}), {1})},
                           T(DType::F32, {2, 2}, xy), {{"axes", std::vector<int64_t>{0, 1}}});
  ir::Value *plus1 = body.op(Prim::Add, {blk, one}, T(DType::F32, {2, 2}, xy));
  ir::Value *sum = body.op(Prim::Psum2, {plus1}, T(DType::F32, {2, 2}),
                           {{"axes", std::vector<int64_t>{0, 1}}});
  ir::Value *idx = body.op(Prim::AxisIndex, {}, T(DType::I32, {}, xy),
                           {{"axes", std::vector<int64_t>{0, 1}}});
  ir::Value *gathered =
      body.op(Prim::AllGather, {idx}, T(DType::I32, {2}, 1),
              {{"axes", std::vector<int64_t>{1}}, {"axis", int64_t(0)}, {"tiled", int64_t(0)}});
  // pscatter of an invariant [4] over y (tiled): this device's block of 2
  ir::Value *four = body.op(Prim::Iota, {}, T(DType::F32, {4}), {{"dimension", int64_t(0)}});
  ir::Value *scat = body.op(Prim::Pscatter, {four}, T(DType::F32, {2}, 2),
                            {{"axes", std::vector<int64_t>{1}}, {"axis", int64_t(0)},
                             {"tiled", int64_t(1)}});
  body.ret({sum, gathered, scat});

  FB mf = newFunc(m, "main", true);
  ir::Value *x = mf.op(Prim::Iota, {}, T(DType::F32, {4, 4}), {{"dimension", int64_t(1)}});
  ir::PartitionSpec pxy{{{0}, {1}}}, p{}, px{{{0}}}, py{{{1}}};
  auto r = mf.eqn(Prim::Shmap, {x}, {T(DType::F32, {2, 2}), T(DType::I32, {4}), T(DType::F32, {4})},
                  {{"mesh", int64_t(0)},
                   {"in_specs", std::vector<ir::PartitionSpec>{pxy}},
                   {"out_specs", std::vector<ir::PartitionSpec>{p, px, py}}},
                  {body.f});
  mf.print("sum", r[0]);
  mf.print("gathered", r[1]);
  mf.print("scattered", r[2]);

  Compiled c = compile(m, 0, "shmap_ir");
  REQUIRE(c.error == "");
  CHECK(c.ir.find("@shm_run_shmap") != std::string::npos);
  CHECK(c.ir.find("@shm_psum") != std::string::npos);
  // the splat, the pbroadcast and the add are one loop: no copy, one stored buffer
  size_t bodyStart = c.ir.find("define internal void @shm.body");
  REQUIRE(bodyStart != std::string::npos);
  std::string bodyIR = c.ir.substr(bodyStart, c.ir.find("\n}\n", bodyStart) - bodyStart);
  // (the loop is a function of its own, called once)
  CHECK(bodyIR.find("call void @shm.body.loop(") != std::string::npos);
  CHECK(bodyIR.find("@shm.body.loop.1") == std::string::npos);
  CHECK(c.ir.find("define internal void @shm.body.loop(") != std::string::npos);
  CHECK(bodyIR.find("memcpy") == std::string::npos);
  // iota along dim 1 of [4,4]: rows [0,1,2,3]; blocks [[0,1],[0,1]] (y=0), [[2,3],[2,3]] (y=1);
  // the sum over the 4 blocks plus 1: 2*([[0,1],[0,1]] + [[2,3],[2,3]]) + 4 = [[8,12],[8,12]].
  check(m, "shmap", {"shm_run_shmap", "shm_psum", "shm_axis_index", "shm_all_gather",
                     "shm_dynamic_slice", "shm_iota", "shm_print"},
        "sum: f32[2,2]\n[[8, 12],\n [8, 12]]\n"
        "gathered: i32[4]\n[0, 1, 2, 3]\n"
        "scattered: f32[4]\n[0, 1, 2, 3]\n");
}

TEST_CASE("structural kernels", "[codegen]") {
  ir::Module m;
  FB f = newFunc(m, "main", true);
  ir::Value *x = f.constant(T(DType::F32, {2, 3}), {1, 2, 3, 4, 5, 6});
  f.print("t", f.op(Prim::Transpose, {x}, T(DType::F32, {3, 2}),
                    {{"permutation", std::vector<int64_t>{1, 0}}}));
  f.print("r", f.op(Prim::Reshape, {x}, T(DType::F32, {3, 2})));
  f.print("m", f.op(Prim::ReduceMax, {x}, T(DType::F32, {2}), {{"axes", std::vector<int64_t>{1}}}));
  ir::Value *w = f.constant(T(DType::F32, {3, 1}), {1, 1, 1});
  f.print("mm", f.op(Prim::Matmul, {x, w}, T(DType::F32, {2, 1})));
  f.print("sl", f.op(Prim::Slice, {x}, T(DType::F32, {2, 1}),
                     {{"start", std::vector<int64_t>{0, 1}},
                      {"limit", std::vector<int64_t>{2, 2}},
                      {"strides", std::vector<int64_t>{1, 1}}}));
  ir::Value *one = f.constant(T(DType::I32, {}), {1});
  ir::Value *zero = f.constant(T(DType::I32, {}), {0});
  f.print("ds", f.op(Prim::DynamicSlice, {x, zero, one}, T(DType::F32, {2, 2}),
                     {{"sizes", std::vector<int64_t>{2, 2}}}));
  f.print("dus", f.op(Prim::DynamicUpdateSlice,
                      {x, f.constant(T(DType::F32, {1, 2}), {0, 0}), one, one},
                      T(DType::F32, {2, 3})));
  f.print("cat", f.op(Prim::Concatenate, {x, x}, T(DType::F32, {4, 3}),
                      {{"dimension", int64_t(0)}}));
  f.print("bc", f.op(Prim::BroadcastInDim, {f.constant(T(DType::F32, {3}), {7, 8, 9})},
                     T(DType::F32, {2, 3}), {{"broadcast_dimensions", std::vector<int64_t>{1}}}));
  check(m, "kernels",
        {"shm_transpose", "shm_reduce", "shm_matmul", "shm_slice", "shm_dynamic_slice",
         "shm_dynamic_update_slice", "shm_concatenate", "shm_broadcast_in_dim", "shm_print"},
        "t: f32[3,2]\n[[1, 4],\n [2, 5],\n [3, 6]]\n"
        "r: f32[3,2]\n[[1, 2],\n [3, 4],\n [5, 6]]\n"
        "m: f32[2]\n[3, 6]\n"
        "mm: f32[2,1]\n[[6],\n [15]]\n"
        "sl: f32[2,1]\n[[2],\n [5]]\n"
        "ds: f32[2,2]\n[[2, 3],\n [5, 6]]\n"
        "dus: f32[2,3]\n[[1, 2, 3],\n [4, 0, 0]]\n"
        "cat: f32[4,3]\n[[1, 2, 3],\n [4, 5, 6],\n [1, 2, 3],\n [4, 5, 6]]\n"
        "bc: f32[2,3]\n[[7, 8, 9],\n [7, 8, 9]]\n");
}

TEST_CASE("emitted IR for every primitive verifies", "[codegen]") {
  // Each element-wise primitive on each dtype it accepts, at -O2: exercises the lowering
  // table and LLVM's verifier without running.
  ir::Module m;
  FB f = newFunc(m, "main", true);
  for (DType d : {DType::F32, DType::F64, DType::I32, DType::I64, DType::F16, DType::BF16}) {
    ir::Type t = T(d, {16}), bt = T(DType::Bool, {16});
    ir::Value *a = f.op(Prim::Iota, {}, t, {{"dimension", int64_t(0)}});
    ir::Value *c = f.constant(t, {3});
    for (Prim p : {Prim::Add, Prim::Sub, Prim::Mul, Prim::Div, Prim::FloorDiv, Prim::Rem, Prim::Max,
                   Prim::Min, Prim::Pow})
      f.print("b", f.op(p, {a, c}, t));
    for (Prim p : {Prim::Eq, Prim::Ne, Prim::Lt, Prim::Le, Prim::Gt, Prim::Ge})
      f.print("c", f.op(p, {a, c}, bt));
    for (Prim p : {Prim::Neg, Prim::Abs}) f.print("u", f.op(p, {a}, t));
    if (ir::isFloat(d))
      for (Prim p : {Prim::Exp, Prim::Log, Prim::Sin, Prim::Cos, Prim::Tanh, Prim::Sqrt})
        f.print("u", f.op(p, {a}, t));
    for (DType to : {DType::F32, DType::F64, DType::I32, DType::Bool, DType::I64, DType::F16, DType::BF16})
      f.print("cv", f.op(Prim::Convert, {a}, T(to, {16})));
  }
  Compiled c = compile(m, 2, "all");
  CHECK(c.error == "");
  Compiled c0 = compile(m, 0, "all");
  CHECK(c0.error == "");
  // f16 / bf16 conversions are integer operations: no half / bfloat types, so no compiler-rt
  // routine (__extendhfsf2, __truncsfhf2, __truncsfbf2, ...) that the link line lacks
  for (const std::string &ir : {c.ir, c0.ir}) {
    CHECK(ir.find(" half") == std::string::npos);
    CHECK(ir.find("bfloat") == std::string::npos);
    CHECK(ir.find("@__") == std::string::npos);
  }
}

namespace {
// The data of a version-1 .npy file the runtime's save wrote (little-endian, C order).
std::vector<unsigned char> npyData(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10) return {};
  size_t header = 10 + (bytes[8] | (size_t)bytes[9] << 8);
  return std::vector<unsigned char>(bytes.begin() + (long)std::min(header, bytes.size()), bytes.end());
}
template <typename T> std::vector<T> npyValues(const std::string &path) {
  std::vector<unsigned char> d = npyData(path);
  std::vector<T> v(d.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), d.data(), v.size() * sizeof(T));
  return v;
}
} // namespace

TEST_CASE("emitted f16 / bf16 conversions agree with runtime/abi/half.h bit for bit", "[codegen]") {
  // f32 values: random mantissas over every exponent f16 and bf16 round differently in, the
  // ties of both (low 13 bits 0x1000, low 16 bits 0x8000) and their neighbours, f32 subnormals,
  // the largest finite values, infinities and NaN. Emitted: f32 -> f16 (saved), f32 -> bf16 ->
  // f32 (saved: exact), f64 -> f16 (through f32), and every non-NaN f16 -> f32.
  std::vector<double> xs;
  std::mt19937_64 rng(5);
  for (uint32_t e = 0; e < 255; e += (e > 85 && e < 150) ? 1 : 7)
    for (int k = 0; k < 300; ++k) {
      const uint32_t s = (uint32_t)(rng() & 1) << 31, m = (uint32_t)rng() & 0x7fffffu;
      for (uint32_t mm : {m, (m & ~0x1fffu) | 0x1000u, ((m & ~0x1fffu) | 0x1000u) + 1, (m & ~0xffffu) | 0x8000u,
                          ((m & ~0xffffu) | 0x8000u) - 1})
        xs.push_back((double)shm::f32_from_bits(s | e << 23 | (mm & 0x7fffffu)));
    }
  for (uint32_t u : {0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x477ff000u,
                     0x477fefffu, 0x00000001u, 0x80000000u})
    xs.push_back((double)shm::f32_from_bits(u));
  std::vector<double> halves;
  for (uint32_t h = 0; h < 0x10000; ++h)
    if ((h & 0x7fff) <= 0x7c00) halves.push_back((double)shm::f16_to_f32((uint16_t)h));
  const int64_t n = (int64_t)xs.size(), nh = (int64_t)halves.size();
  const std::string dir = tempDir();

  ir::Module m;
  FB f = newFunc(m, "main", true);
  ir::Value *x = f.constant(T(DType::F32, {n}), xs);
  auto save = [&](ir::Value *v, const std::string &name) { f.eqn(Prim::Save, {v}, {}, {{"path", dir + "/" + name}}); };
  save(f.op(Prim::Convert, {x}, T(DType::F16, {n})), "h.npy");
  save(f.op(Prim::Convert, {f.op(Prim::Convert, {x}, T(DType::BF16, {n}))}, T(DType::F32, {n})), "b.npy");
  ir::Value *x64 = f.op(Prim::Convert, {x}, T(DType::F64, {n}));
  ir::Value *y64 = f.op(Prim::Mul, {x64, f.constant(T(DType::F64, {n}), {1.0 + 0x1p-40})}, T(DType::F64, {n}));
  save(f.op(Prim::Convert, {y64}, T(DType::F16, {n})), "d.npy");
  ir::Value *hv = f.constant(T(DType::F16, {nh}), halves);
  save(f.op(Prim::Convert, {hv}, T(DType::F32, {nh})), "w.npy");
  for (int level : {0, 2}) {
    INFO("at -O" << level);
    Compiled c = compile(m, level, "halfconv");
    REQUIRE(c.error == "");
    int status = 0;
    std::string out = linkAndRun(c.object, status);
    REQUIRE(status == 0);
    std::vector<uint16_t> h = npyValues<uint16_t>(dir + "/h.npy"), d = npyValues<uint16_t>(dir + "/d.npy");
    std::vector<float> b = npyValues<float>(dir + "/b.npy"), w = npyValues<float>(dir + "/w.npy");
    REQUIRE((int64_t)h.size() == n);
    REQUIRE((int64_t)b.size() == n);
    REQUIRE((int64_t)d.size() == n);
    REQUIRE((int64_t)w.size() == nh);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float xf = (float)xs[(size_t)i];
      const bool nan = std::isnan(xf);
      bad += nan ? (h[(size_t)i] & 0x7fff) <= 0x7c00 : h[(size_t)i] != shm::f32_to_f16(xf);
      bad += nan ? !std::isnan(b[(size_t)i])
                 : shm::f32_bits(b[(size_t)i]) != shm::f32_bits(shm::bf16_to_f32(shm::f32_to_bf16(xf)));
      const double y = xs[(size_t)i] * (1.0 + 0x1p-40);
      bad += nan ? (d[(size_t)i] & 0x7fff) <= 0x7c00 : d[(size_t)i] != shm::f32_to_f16((float)y);
    }
    for (int64_t i = 0; i < nh; ++i)
      bad += shm::f32_bits(w[(size_t)i]) != shm::f32_bits((float)halves[(size_t)i]);
    CHECK(bad == 0);
  }
}

// --target-cpu (codegen/Target.cpp) and the features the start-up check embeds
// (runtime/abi/cpu_features.h).
namespace {

std::set<std::string> checkedFeatureNames() {
  std::set<std::string> s;
  for (const shm::CpuFeature &f : shm::kCpuFeatures) s.insert(f.name);
  return s;
}

codegen::Target resolved(const std::string &name) {
  codegen::Target t;
  std::string error, hint;
  INFO(name << ": " << error);
  REQUIRE(codegen::resolveTarget(name, t, error, hint));
  return t;
}

} // namespace

TEST_CASE("--target-cpu: the generic levels check what LLVM's levels turn on", "[codegen][target]") {
  CHECK(resolved("x86-64").checked.empty());
  std::vector<std::string> want;
  for (const shm::CpuLevel &level : shm::kCpuLevels) {
    std::string adds = level.adds;
    for (size_t start = 0; start < adds.size();) {
      size_t end = std::min(adds.find(',', start), adds.size());
      want.push_back(adds.substr(start, end - start));
      start = end + 1;
    }
    codegen::Target t = resolved(level.name);
    INFO(level.name);
    CHECK(std::set<std::string>(t.checked.begin(), t.checked.end()) ==
          std::set<std::string>(want.begin(), want.end()));
    CHECK(t.features == "");  // a named CPU gets LLVM's features for it, not the host's
    CHECK(t.cpu == level.name);
  }
  codegen::Target v3 = resolved("x86-64-v3");
  CHECK(v3.has("avx2"));
  CHECK(v3.has("fma"));
  CHECK(!v3.has("avx512f"));
  codegen::Target spr = resolved("sapphirerapids");
  for (const char *f : {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd", "avx512fp16", "avx512bf16",
                        "avx512vnni", "avxvnni", "gfni"}) {
    INFO(f);
    CHECK(std::find(spr.checked.begin(), spr.checked.end(), f) != spr.checked.end());
  }
  CHECK(resolved("native").requested == "native");
  CHECK(resolved("native").cpu != "native");
}

TEST_CASE("--target-cpu: every ISA feature of every known CPU is checked or deliberately not", "[codegen][target]") {
  // What nothing shmapc emits can use (runtime/abi/cpu_features.h says why): the x86-64 baseline,
  // extensions reached only through intrinsics, TSX, AMX, system extensions. A feature a new
  // LLVM adds fails this test until it is put in kCpuFeatures or here.
  const std::set<std::string> unchecked = {
      "64bit", "cmov", "cx8", "fxsr", "mmx", "sse", "sse2", "x87",                          // baseline
      "crc32", "aes", "pclmul", "vaes", "vpclmulqdq", "sha", "sha512", "sm3", "sm4",  // crypto
      "rdrnd", "rdseed", "adx", "prfchw", "prefetchi", "clflushopt", "clwb", "cldemote", "movdiri",
      "movdir64b", "serialize", "waitpkg", "rdpid", "cmpccxadd", "raoint", "avxvnniint8", "avxvnniint16",
      "avx512vp2intersect", "clzero", "mwaitx", "rdpru", "wbnoinvd", "pku", "lwp", "evex512",
      "xsave", "xsaveopt", "xsavec", "xsaves", "fsgsbase", "invpcid", "sgx", "pconfig", "ptwrite", "shstk",
      "kl", "widekl", "enqcmd", "uintr", "hreset", "usermsr", "rtm", "tsxldtrk", "amx-tile", "amx-int8",
      "amx-bf16", "amx-fp16", "amx-complex", "prefetchwt1", "avx10.1-256", "avx10.1-512"};
  const std::set<std::string> checked = checkedFeatureNames();
  std::set<std::string> seen;
  for (const std::string &cpu : codegen::targetCpuNames()) {
    codegen::Target t = resolved(cpu);
    for (const std::string &f : t.checked) seen.insert(f);
    llvm::SmallVector<llvm::StringRef, 64> isa;
    llvm::X86::getFeaturesForCPU(cpu, isa);
    for (llvm::StringRef f : isa) {
      INFO(cpu << ": LLVM turns on " << f.str() << ", which is neither checked nor listed as unchecked");
      CHECK((checked.count(f.str()) || unchecked.count(f.str())));
      if (checked.count(f.str())) {
        INFO(cpu << ": " << f.str() << " is on in LLVM's CPU table but not in the subtarget");
        CHECK(t.has(f.str()));
      }
    }
  }
  // Every name of the table is one LLVM uses (no typo that would never be checked).
  for (const std::string &f : checked) {
    INFO(f << " is on for no CPU LLVM knows");
    CHECK(seen.count(f));
  }
}

TEST_CASE("--target-cpu: an unknown name is refused with the closest one", "[codegen][target]") {
  codegen::Target t;
  std::string error, hint;
  CHECK(!codegen::resolveTarget("skylake-avx", t, error, hint));
  CHECK(error == "unknown --target-cpu 'skylake-avx'");
  CHECK(hint.rfind("did you mean 'skylake-avx512'?", 0) == 0);
  CHECK(hint.find("znver4") != std::string::npos);
  CHECK(!codegen::resolveTarget("ZNVER4", t, error, hint));
  CHECK(hint.rfind("did you mean 'znver4'?", 0) == 0);
  // 32-bit CPUs LLVM knows make no x86-64 code
  CHECK(!codegen::resolveTarget("i686", t, error, hint));
  CHECK(!codegen::resolveTarget("", t, error, hint));
  std::vector<std::string> names = codegen::targetCpuNames();
  for (const char *n : {"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "haswell", "skylake-avx512",
                        "sapphirerapids", "znver4"}) {
    INFO(n);
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
  }
}

TEST_CASE("--target-cpu: the start-up check is a baseline constructor", "[codegen][target]") {
  ir::Module m;
  FB f = newFunc(m, "main", true);
  f.print("x", f.constant(T(DType::F32, {}), {1.0}));
  llvm::LLVMContext ctx;
  std::string err;
  codegen::Target v4 = resolved("x86-64-v4");
  std::unique_ptr<llvm::Module> lm = codegen::emitLLVM(m, ctx, err, v4);
  REQUIRE(lm);
  std::string text = codegen::printLLVM(*lm);
  CHECK(text.find("{ i32 101, ptr @shm.check_cpu, ptr null }") != std::string::npos);
  CHECK(text.find("call void @shm_check_cpu(") != std::string::npos);
  CHECK(text.find("\"target-cpu\"=\"x86-64\" \"target-features\"=\"+cx8,+fxsr,+mmx,+sse,+sse2,+x87\"") !=
        std::string::npos);
  CHECK(text.find("sse3,ssse3,sse4.1,sse4.2,popcnt,cx16,sahf,avx,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,avx512f,"
                  "avx512bw,avx512cd,avx512dq,avx512vl") != std::string::npos);
  // for the baseline, nothing to check and no constructor
  llvm::LLVMContext ctx2;
  std::unique_ptr<llvm::Module> base = codegen::emitLLVM(m, ctx2, err, resolved("x86-64"));
  REQUIRE(base);
  CHECK(codegen::printLLVM(*base).find("shm_check_cpu") == std::string::npos);
}
