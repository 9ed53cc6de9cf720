// sema: name resolution, type/shape checking and lowering to IR. Programs are parsed from
// source; tests assert on the IR (prims, types, params) or on the diagnostic reported.
#include "ir/IR.h"
#include "parser/Parser.h"
#include "rules/Rules.h"
#include "sema/Sema.h"
#include "source/Suggest.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace shmapc;
using ir::Prim;

namespace {

struct Compiled {
  SourceManager sm;
  std::vector<ast::Program> programs;
  std::unique_ptr<ir::Module> module;
  std::string diags;
  bool ok = false;
};

// Compiles `src` as test.smp; `modules` are importable units (name, source).
std::unique_ptr<Compiled> compile(const std::string &src,
                                  const std::vector<std::pair<std::string, std::string>> &modules = {}) {
  auto c = std::make_unique<Compiled>();
  std::ostringstream out;
  Diagnostics diags(c->sm, out);
  try {
    c->programs.reserve(modules.size() + 1);
    c->programs.push_back(parseProgram(c->sm.addBuffer("test.smp", src), c->sm, diags));
    for (const auto &[name, text] : modules)
      c->programs.push_back(parseProgram(c->sm.addBuffer(name + ".smp", text), c->sm, diags));
    std::vector<sema::ModuleUnit> units;
    units.push_back({"", &c->programs[0]});
    for (size_t i = 0; i < modules.size(); ++i) units.push_back({modules[i].first, &c->programs[i + 1]});
    c->module = sema::buildModule(units, diags);
    c->ok = true;
  } catch (const CompileError &) {
  }
  c->diags = out.str();
  return c;
}

// Compiles a program that must be accepted, and checks the IR verifies.
std::unique_ptr<Compiled> compileOk(const std::string &src,
                                    const std::vector<std::pair<std::string, std::string>> &modules = {}) {
  auto c = compile(src, modules);
  INFO(c->diags);
  REQUIRE(c->ok);
  std::vector<std::string> problems = rules::verifyModule(*c->module);  // shape rules too
  std::string all;
  for (const auto &p : problems) all += p + "\n";
  INFO(all);
  INFO(ir::printModule(*c->module));
  CHECK(problems.empty());
  return c;
}

// Asserts the program is rejected with diagnostic `name` at line:col.
void expectError(const std::string &src, const std::string &name, int line, int col,
                 const std::string &fragment = "") {
  auto c = compile(src);
  INFO(c->diags);
  REQUIRE_FALSE(c->ok);
  std::string where = "test.smp:" + std::to_string(line) + ":" + std::to_string(col) + ": error:";
  CHECK(c->diags.find(where) != std::string::npos);
  CHECK(c->diags.find("[" + name + "]") != std::string::npos);
  CHECK(c->diags.find("help:") != std::string::npos);
  if (!fragment.empty()) CHECK(c->diags.find(fragment) != std::string::npos);
}

std::vector<const ir::Eqn *> eqns(const ir::Func &f, Prim p) {
  std::vector<const ir::Eqn *> out;
  for (const ir::Eqn &e : f.eqns)
    if (e.prim == p) out.push_back(&e);
  return out;
}

const ir::Eqn &only(const ir::Func &f, Prim p) {
  auto es = eqns(f, p);
  INFO(ir::printFunc(f));
  REQUIRE(es.size() == 1);
  return *es[0];
}

std::vector<int64_t> shape(const ir::Value *v) { return v->type.shape; }

const char *kMesh = "mesh xy = <[\"x\"=2, \"y\"=4]>;\n";

} // namespace

// ---------------------------------------------------------------- lowering

TEST_CASE("the documented example lowers to a shmap with block-typed body", "[sema]") {
  auto c = compileOk(std::string(kMesh) + R"(
@shmap(mesh=xy, in_specs=(P("x", None), P()), out_specs=P())
def loss(xb: f32[2,3], w: f32[3]) -> f32[] {
  let local = sum(xb @ w);
  return psum(local, ("x", "y"));
}
def main() {
  let x = iota(f32[4,3]);
  let w = ones(f32[3]);
  print("loss", loss(x, w));
}
)");
  const ir::Func &main = *c->module->main;
  const ir::Eqn &sh = only(main, Prim::Shmap);
  CHECK(sh.intParam("mesh") == 0);
  CHECK(shape(sh.ins[0]) == std::vector<int64_t>{4, 3});
  CHECK(sh.outs[0]->type.shape.empty());
  const auto &in = sh.specsParam("in_specs");
  REQUIRE(in.size() == 2);
  CHECK(in[0].dims == std::vector<std::vector<int>>{{0}, {}});
  CHECK(in[1].dims.empty());
  const ir::Func &body = *sh.bodies[0];
  CHECK(body.isShmapBody);
  CHECK(body.mesh == c->module->meshes[0].get());
  CHECK(shape(body.params[0]) == std::vector<int64_t>{2, 3});
  const ir::Eqn &ps = only(body, Prim::Psum);
  CHECK(ps.intsParam("axes") == std::vector<int64_t>{0, 1});
  // xb @ w: 1-D right operand -> reshape to [3,1], matmul, reshape back.
  const ir::Eqn &mm = only(body, Prim::Matmul);
  CHECK(shape(mm.outs[0]) == std::vector<int64_t>{2, 1});
  CHECK(only(main, Prim::Print).strParam("label") == "loss");
}

TEST_CASE("broadcasting inserts broadcast_in_dim and literals adopt the dtype", "[sema]") {
  auto c = compileOk(R"(
def main() {
  let a = ones(f32[4,3]);
  let b = ones(f32[3]);
  let c = a + b;
  let d = c * 2;
  let e = 2 + 3.5;
  print(d);
  print(e);
}
)");
  const ir::Func &main = *c->module->main;
  const ir::Eqn &bc = only(main, Prim::BroadcastInDim);
  CHECK(bc.intsParam("broadcast_dimensions") == std::vector<int64_t>{1});
  CHECK(shape(bc.outs[0]) == std::vector<int64_t>{4, 3});
  // `c * 2`: the int literal becomes an f32 splat constant of c's shape.
  const ir::Eqn &mul = only(main, Prim::Mul);
  CHECK(mul.ins[1]->type.dtype == ir::DType::F32);
  CHECK(shape(mul.ins[1]) == std::vector<int64_t>{4, 3});
  const ir::Eqn &add2 = *eqns(main, Prim::Add).at(1);
  CHECK(add2.outs[0]->type.dtype == ir::DType::F32);
  CHECK(add2.outs[0]->hint == "e");
}

TEST_CASE("mixed dtypes promote as in JAX; / is true division, // floor division", "[sema]") {
  auto c = compileOk(R"(
def main() {
  let i = iota(i32[4]);
  print(i + ones(f32[4]));
  print(ones(f32[4]) * ones(f64[4]));
  print(i * 1.5);
  print(i / 2);
  print(i // 2);
  print(i % 3);
  print(ones(f32[4]) // 2);
  print(i < 2.5);
}
)");
  const ir::Func &main = *c->module->main;
  auto prints = eqns(main, Prim::Print);
  REQUIRE(prints.size() == 8);
  auto dtypeOf = [&](int k) { return prints[(size_t)k]->ins[0]->type.dtype; };
  CHECK(dtypeOf(0) == ir::DType::F32);  // i32 + f32: the i32 operand is converted
  CHECK(dtypeOf(1) == ir::DType::F64);  // f32 * f64
  CHECK(dtypeOf(2) == ir::DType::F32);  // a float literal lifts i32 to f32
  CHECK(dtypeOf(3) == ir::DType::F32);  // i32 / i32 is f32
  CHECK(dtypeOf(4) == ir::DType::I32);  // floor division stays integer
  CHECK(dtypeOf(5) == ir::DType::I32);
  CHECK(dtypeOf(6) == ir::DType::F32);
  CHECK(dtypeOf(7) == ir::DType::Bool);
  CHECK(eqns(main, Prim::FloorDiv).size() == 2);
  const ir::Eqn &div = only(main, Prim::Div);
  CHECK(div.ins[0]->type.dtype == ir::DType::F32);
  CHECK(div.ins[1]->type.dtype == ir::DType::F32);  // the literal 2 is made an f32 constant
  CHECK(only(main, Prim::Rem).outs[0]->type.dtype == ir::DType::I32);
  CHECK(eqns(main, Prim::Convert).size() == 5);  // i in prints 0, 2, 3, 7 and f32 -> f64
}

TEST_CASE("functions are instantiated per argument types and memoized", "[sema]") {
  auto c = compileOk(R"(
def relu(x) { return maximum(x, 0.0); }
def main() {
  print(relu(ones(f32[4])));
  print(relu(ones(f32[4])));
  print(relu(ones(f32[2,2])));
}
)");
  auto calls = eqns(*c->module->main, Prim::Call);
  REQUIRE(calls.size() == 3);
  CHECK(calls[0]->bodies[0] == calls[1]->bodies[0]);
  CHECK(calls[0]->bodies[0] != calls[2]->bodies[0]);
  CHECK(calls[0]->bodies[0]->name == "relu");
  CHECK(calls[2]->bodies[0]->name == "relu_1");
}

TEST_CASE("imported module functions and static axis arguments", "[sema]") {
  auto c = compileOk(std::string("import nn;\n") + kMesh + R"(
def mean_over(v, ax) { return pmean(v, ax); }
@shmap(mesh=xy, in_specs=P("x"), out_specs=P())
def f(a) { return mean_over(nn.relu(a), ("x", "y")); }
def main() { print(f(ones(f32[8]))); }
)", {{"nn", "def relu(x) { return maximum(x, 0.0); }\n"}});
  const ir::Func &body = *only(*c->module->main, Prim::Shmap).bodies[0];
  auto calls = eqns(body, Prim::Call);
  REQUIRE(calls.size() == 2);
  CHECK(calls[0]->bodies[0]->name == "nn.relu");
  const ir::Func &mo = *calls[1]->bodies[0];
  CHECK(mo.params.size() == 1);  // the axis names are static, not a parameter value
  CHECK(mo.mesh == body.mesh);   // plain function called from a shmap body
  CHECK(only(mo, Prim::Psum).intsParam("axes") == std::vector<int64_t>{0, 1});
  CHECK(only(mo, Prim::Div).ins[1]->type.dtype == ir::DType::F32);
}

TEST_CASE("shmap out_specs multiply block dims back to global", "[sema]") {
  auto c = compileOk(std::string(kMesh) + R"(
@shmap(mesh=xy, in_specs=P(("x","y"), None), out_specs=(P(None, "y"), P("x")))
def f(a) { return a, a[0]; }
def main() {
  let p, q = f(ones(f32[16,4]));
  print(p);
  print(q);
}
)");
  const ir::Eqn &sh = only(*c->module->main, Prim::Shmap);
  CHECK(shape(sh.bodies[0]->params[0]) == std::vector<int64_t>{2, 4});
  CHECK(shape(sh.outs[0]) == std::vector<int64_t>{2, 16});
  CHECK(shape(sh.outs[1]) == std::vector<int64_t>{8});
  CHECK(sh.specsParam("in_specs")[0].dims == std::vector<std::vector<int>>{{0, 1}, {}});
}

TEST_CASE("for loops carry assigned names and capture read ones", "[sema]") {
  auto c = compileOk(R"(
def main() {
  let s = zeros(f32[3]);
  let w = ones(f32[3]);
  let unused = ones(f32[2]);
  for i in range(1, 4) {
    let t = w * 2.0;
    s = s + t;
  }
  print(s);
}
)");
  const ir::Func &main = *c->module->main;
  const ir::Eqn &loop = only(main, Prim::Loop);
  CHECK(loop.intParam("lo") == 1);
  CHECK(loop.intParam("hi") == 4);
  CHECK(loop.intParam("num_consts") == 1);
  REQUIRE(loop.ins.size() == 2);
  CHECK(loop.ins[0]->hint == "w");
  CHECK(loop.ins[1]->hint == "s");
  const ir::Func &body = *loop.bodies[0];
  CHECK(body.isNested);
  REQUIRE(body.params.size() == 3);
  CHECK(body.params[0]->type.dtype == ir::DType::I32);
  CHECK(body.results.size() == 1);
  // print(s) prints the loop's result.
  CHECK(only(main, Prim::Print).ins[0] == loop.outs[0]);
}

TEST_CASE("nested loops capture through both bodies", "[sema]") {
  auto c = compileOk(R"(
def main() {
  let acc = zeros(f32[]);
  let k = ones(f32[]);
  for i in range(3) {
    for j in range(2) {
      acc = acc + k;
    }
  }
  print(acc);
}
)");
  const ir::Eqn &outer = only(*c->module->main, Prim::Loop);
  CHECK(outer.intParam("num_consts") == 1);
  const ir::Eqn &inner = only(*outer.bodies[0], Prim::Loop);
  CHECK(inner.intParam("num_consts") == 1);
  CHECK(inner.ins[0] == outer.bodies[0]->params[1]);  // k, passed down
}

TEST_CASE("if lowers to cond with pass-through results", "[sema]") {
  auto c = compileOk(R"(
def main() {
  let x = ones(f32[2]);
  let y = zeros(f32[2]);
  let n = 3;
  if n > 2 {
    x = x * 2.0;
  } else {
    y = y + x;
  }
  print(x);
  print(y);
}
)");
  const ir::Eqn &cond = only(*c->module->main, Prim::Cond);
  CHECK(cond.outs.size() == 2);
  CHECK(cond.ins[0]->type.dtype == ir::DType::Bool);
  const ir::Func &t = *cond.bodies[0], &f = *cond.bodies[1];
  CHECK(t.params.size() == cond.ins.size() - 1);
  CHECK(f.params.size() == cond.ins.size() - 1);
  CHECK(t.results.size() == 2);
  CHECK(t.results[1] == t.params[1]);  // y passes through the true branch
}

TEST_CASE("collectives lower with mesh axis indices and JAX shapes", "[sema]") {
  auto c = compileOk(std::string(kMesh) + R"(
@shmap(mesh=xy, in_specs=P("x"), out_specs=(P("x"), P("x"), P("x"), P("x"), P("x"), P("x"), P("x")))
def f(a: f32[4,8]) {
  let g = all_gather(a, "y");
  let gt = all_gather(a, "y", axis=1, tiled=true);
  let s = psum_scatter(a, "y", scatter_dimension=1, tiled=true);
  let t = all_to_all(a, "y", 0, 1, tiled=true);
  let p = ppermute(a, "x", perm=[(0, 1), (1, 0)]);
  let i = cast(axis_index(("x", "y")), f32) + cast(axis_size("y"), f32);
  let m = pmean(a, "y");
  return g, gt, s, t, p, m + i, pmax(a, "x");
}
def main() {
  let a, b, c, d, e, f2, g = f(ones(f32[8,8]));
  print(a);
}
)");
  const ir::Func &body = *only(*c->module->main, Prim::Shmap).bodies[0];
  const auto gathers = eqns(body, Prim::AllGather);
  REQUIRE(gathers.size() == 2);
  CHECK(shape(gathers[0]->outs[0]) == std::vector<int64_t>{4, 4, 8});
  CHECK(gathers[0]->intParam("tiled") == 0);
  CHECK(shape(gathers[1]->outs[0]) == std::vector<int64_t>{4, 32});
  CHECK(shape(only(body, Prim::PsumScatter).outs[0]) == std::vector<int64_t>{4, 2});
  CHECK(shape(only(body, Prim::AllToAll).outs[0]) == std::vector<int64_t>{1, 32});
  CHECK(only(body, Prim::Ppermute).intsParam("perm") == std::vector<int64_t>{0, 1, 1, 0});
  CHECK(only(body, Prim::AxisIndex).intsParam("axes") == std::vector<int64_t>{0, 1});
  CHECK(only(body, Prim::Psum).intsParam("axes") == std::vector<int64_t>{1});
}

TEST_CASE("untiled psum_scatter and all_to_all follow the group size", "[sema]") {
  auto c = compileOk(std::string(kMesh) + R"(
@shmap(mesh=xy, in_specs=P(), out_specs=(P(), P()))
def f(a: f32[4,3]) {
  return psum_scatter(a, "y"), all_to_all(a, "y", 0, 1);
}
def main() { let p, q = f(ones(f32[4,3])); print(p); }
)");
  const ir::Func &body = *only(*c->module->main, Prim::Shmap).bodies[0];
  CHECK(shape(only(body, Prim::PsumScatter).outs[0]) == std::vector<int64_t>{3});
  CHECK(shape(only(body, Prim::AllToAll).outs[0]) == std::vector<int64_t>{3, 4});
}

TEST_CASE("matmul follows numpy for 1-D and batched operands", "[sema]") {
  auto c = compileOk(R"(
def main() {
  let v = ones(f32[3]);
  let m = ones(f32[3,4]);
  let b = ones(f32[5,2,3]);
  print(v @ m);
  print(b @ m);
  print(v @ v);
}
)");
  auto mms = eqns(*c->module->main, Prim::Matmul);
  REQUIRE(mms.size() == 3);
  CHECK(shape(mms[0]->ins[0]) == std::vector<int64_t>{1, 3});
  CHECK(shape(mms[1]->ins[1]) == std::vector<int64_t>{5, 3, 4});  // rhs batch-broadcast
  CHECK(shape(mms[1]->outs[0]) == std::vector<int64_t>{5, 2, 4});
  auto prints = eqns(*c->module->main, Prim::Print);
  CHECK(shape(prints[0]->ins[0]) == std::vector<int64_t>{4});
  CHECK(shape(prints[2]->ins[0]).empty());
}

TEST_CASE("indexing lowers to slice and reshape", "[sema]") {
  auto c = compileOk(R"(
def main() {
  let x = iota(f32[4,6]);
  print(x[1]);
  print(x[:, 1:5:2]);
  print(x[-1, None]);
  print(x[None]);
}
)");
  const ir::Func &main = *c->module->main;
  auto slices = eqns(main, Prim::Slice);
  REQUIRE(slices.size() == 3);
  CHECK(slices[0]->intsParam("start") == std::vector<int64_t>{1, 0});
  CHECK(slices[1]->intsParam("strides") == std::vector<int64_t>{1, 2});
  CHECK(shape(slices[1]->outs[0]) == std::vector<int64_t>{4, 2});
  CHECK(slices[2]->intsParam("start") == std::vector<int64_t>{3, 0});
  auto prints = eqns(main, Prim::Print);
  CHECK(shape(prints[0]->ins[0]) == std::vector<int64_t>{6});
  CHECK(shape(prints[2]->ins[0]) == std::vector<int64_t>{1, 6});
  CHECK(shape(prints[3]->ins[0]) == std::vector<int64_t>{1, 4, 6});
}

TEST_CASE("builtins: reductions, reshape, transpose, concat, dynamic slices", "[sema]") {
  auto c = compileOk(R"(
def main() {
  let x = iota(f32[2,3,4], dim=2);
  print(sum(x, axis=(0, -1)));
  print(mean(x));
  print(reshape(x, [4, -1]));
  print(transpose(x));
  print(concatenate([x, x], axis=1));
  let i = 1;
  print(dynamic_slice(x, [i, 0, 0], [1, 3, 2]));
  print(dynamic_update_slice(x, zeros(f32[1,3,4]), [i, 0, 0]));
  print(where(x > 1.0, x, 0));
  print(cast(x, i32));
  print([[1.0, 2.0], [3.0, 4.0]]);
}
)");
  const ir::Func &main = *c->module->main;
  auto sums = eqns(main, Prim::ReduceSum);
  REQUIRE(sums.size() == 2);
  CHECK(sums[0]->intsParam("axes") == std::vector<int64_t>{0, 2});
  CHECK(shape(sums[0]->outs[0]) == std::vector<int64_t>{3});
  CHECK(only(main, Prim::Iota).intParam("dimension") == 2);
  CHECK(only(main, Prim::Transpose).intsParam("permutation") == std::vector<int64_t>{2, 1, 0});
  CHECK(shape(only(main, Prim::Concatenate).outs[0]) == std::vector<int64_t>{2, 6, 4});
  CHECK(only(main, Prim::DynamicSlice).ins.size() == 4);
  CHECK(only(main, Prim::Select).ins[0]->type.dtype == ir::DType::Bool);
  auto prints = eqns(main, Prim::Print);
  CHECK(shape(prints[2]->ins[0]) == std::vector<int64_t>{4, 6});
  CHECK(prints[9]->ins[0]->type.dtype == ir::DType::F32);
}

TEST_CASE("every eqn and function carries a source location", "[sema]") {
  auto c = compileOk(std::string(kMesh) + R"(
@shmap(mesh=xy, in_specs=P("x"), out_specs=P("x"))
def f(a) { for i in range(2) { a = a + 1.0; } return a; }
def main() { print(f(ones(f32[4]))); }
)");
  for (const auto &fn : c->module->funcs) {
    CHECK(fn->loc.valid());
    for (const ir::Eqn &e : fn->eqns) CHECK(e.loc.valid());
  }
}

TEST_CASE("shmap bodies: loops, conds and calls keep the mesh", "[sema]") {
  auto c = compileOk(R"(mesh m = <["i"=4]>;
def step(a, ax) { return ppermute(a, ax, perm=[(0, 1), (1, 2), (2, 3), (3, 0)]); }
@shmap(mesh=m, in_specs=(P("i"), P()), out_specs=P("i"), check_vma=false)
def ring(x: f32[2,3], w: f32[3,3]) {
  let acc = zeros(f32[2,3]);
  let blk = x;
  for k in range(4) {
    acc = acc + blk @ w;
    blk = step(blk, "i");
    if axis_index("i") == k { acc = acc * 0.5; } else { acc = acc + w[0]; }
  }
  return acc;
}
def main() { print(ring(ones(f32[8,3]), ones(f32[3,3]))); }
)");
  const ir::Func &body = *only(*c->module->main, Prim::Shmap).bodies[0];
  CHECK_FALSE(body.checkVma);
  CHECK(body.autoPbroadcast);
  const ir::Eqn &loop = only(body, Prim::Loop);
  const ir::Func &lb = *loop.bodies[0];
  CHECK(lb.mesh == body.mesh);
  CHECK(only(lb, Prim::Call).bodies[0]->mesh == body.mesh);
  const ir::Eqn &cond = only(lb, Prim::Cond);
  CHECK(cond.bodies[0]->mesh == body.mesh);
  // w is read only by the else branch; both branches still take it.
  CHECK(cond.bodies[0]->params.size() == 2);
  CHECK(cond.bodies[1]->params.size() == 2);
}

// ---------------------------------------------------------------- diagnostics

TEST_CASE("error: shapes do not broadcast", "[sema][errors]") {
  expectError("def main() {\n  let a = ones(f32[4]);\n  let b = a + ones(f32[3]);\n}\n",
              "shape-mismatch", 3, 13, "cannot add f32[4] and f32[3]: shapes do not broadcast");
}

TEST_CASE("error: dimension not divisible by the mesh axes", "[sema][errors]") {
  expectError(std::string(kMesh) +
                  "@shmap(mesh=xy, in_specs=P((\"x\",\"y\")), out_specs=P())\n"
                  "def f(a) { return 1.0; }\n"
                  "def main() { print(f(ones(f32[6]))); }\n",
              "not-divisible", 4, 22,
              "dimension 0 of size 6 is split over x(2)*y(4)=8 devices; 6 is not divisible by 8");
}

TEST_CASE("error: spec longer than the rank", "[sema][errors]") {
  expectError(std::string(kMesh) +
                  "@shmap(mesh=xy, in_specs=P(\"x\", None), out_specs=P())\n"
                  "def f(a) { return 1.0; }\n"
                  "def main() { print(f(ones(f32[4]))); }\n",
              "spec-too-long", 2, 26);
}

TEST_CASE("error: unknown axis in a spec and in a collective", "[sema][errors]") {
  expectError(std::string(kMesh) +
                  "@shmap(mesh=xy, in_specs=P(\"z\"), out_specs=P())\n"
                  "def f(a) { return 1.0; }\n"
                  "def main() { print(f(ones(f32[4]))); }\n",
              "unknown-axis", 2, 28, "mesh xy has no axis \"z\"");
  expectError(std::string(kMesh) +
                  "@shmap(mesh=xy, in_specs=P(), out_specs=P())\n"
                  "def f(a) { return psum(a, \"yy\"); }\n"
                  "def main() { print(f(ones(f32[4]))); }\n",
              "unknown-axis", 3, 27, "did you mean \"y\"?");
}

TEST_CASE("error: collective outside a shmap, with the call chain", "[sema][errors]") {
  expectError("def main() {\n  let a = ones(f32[4]);\n  print(psum(a, \"x\"));\n}\n",
              "collective-outside-shmap", 3, 9);
  auto c = compile("def g(a) { return axis_index(\"x\"); }\n"
                   "def main() { print(g(ones(f32[4]))); }\n");
  CHECK(c->diags.find("test.smp:1:19: error:") != std::string::npos);
  CHECK(c->diags.find("test.smp:2:20: note: in the call to g here") != std::string::npos);
}

TEST_CASE("error: axis used twice in a spec or collective", "[sema][errors]") {
  expectError(std::string(kMesh) +
                  "@shmap(mesh=xy, in_specs=P(\"x\", \"x\"), out_specs=P())\n"
                  "def f(a) { return 1.0; }\n"
                  "def main() { print(f(ones(f32[4,4]))); }\n",
              "axis-used-twice", 2, 33);
  expectError(std::string(kMesh) +
                  "@shmap(mesh=xy, in_specs=P(), out_specs=P())\n"
                  "def f(a) { return psum(a, (\"x\", \"x\")); }\n"
                  "def main() { print(f(ones(f32[4]))); }\n",
              "axis-used-twice", 3, 33);
}

TEST_CASE("error: dtype mismatch", "[sema][errors]") {
  // Numbers promote (JAX's lattice); bool does not mix with them.
  expectError("def main() {\n  let a = ones(f32[4]) + ones(bool[4]);\n}\n", "dtype-mismatch", 2,
              24, "cast(b, f32)");
  expectError("def main() {\n  let a = ones(bool[4]) * 2.5;\n}\n", "dtype-mismatch", 2, 25);
}

TEST_CASE("error: unknown name and function", "[sema][errors]") {
  expectError("def main() {\n  let value = 1;\n  print(valu);\n}\n", "unknown-name", 3, 9,
              "did you mean value?");
  expectError("def main() {\n  print(frobnicate(1));\n}\n", "unknown-function", 2, 9);
}

namespace {
size_t fullEditDistance(const std::string &a, const std::string &b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j)
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
  return d[a.size()][b.size()];
}
} // namespace

TEST_CASE("did-you-mean: the banded edit distance agrees with the full one up to its limit",
          "[sema][suggest]") {
  // Every pair of strings over {a, b} of length up to 6.
  std::vector<std::string> words = {""};
  for (size_t k = 0; k < words.size() && words[k].size() < 6; ++k)
    for (char c : {'a', 'b'}) words.push_back(words[k] + c);
  for (const std::string &a : words)
    for (const std::string &b : words)
      for (size_t limit : {0, 1, 2, 3}) {
        INFO(a << " / " << b << " limit " << limit);
        CHECK(editDistanceWithin(a, b, limit) == std::min(fullEditDistance(a, b), limit + 1));
      }
}

TEST_CASE("did-you-mean: close names only, and none for very long names", "[sema][suggest]") {
  CHECK(closestName("valu", {"x", "value", "val"}) == "value");
  CHECK(closestName("x", {"y"}).empty());  // distance 1 is the whole name
  CHECK(closestName("abcdef", {"uvwxyz"}).empty());
  const std::string longName(kMaxSuggestLength, 'a');
  CHECK(closestName(longName + "b", {longName}).empty());  // longer than the cap
  CHECK(closestName(longName.substr(1) + "b", {longName}) == longName);
  // Two 100,000-character names: answered without comparing them (once 17 s).
  CHECK(closestName(std::string(100000, 'a'), {std::string(100000, 'b')}).empty());
}

TEST_CASE("error: wrong argument count", "[sema][errors]") {
  expectError("def f(a, b) { return a; }\ndef main() {\n  print(f(1));\n}\n", "argument-count",
              3, 9, "f takes 2 argument(s) but 1 were given");
  expectError("def main() {\n  print(exp(1.0, 2.0));\n}\n", "argument-count", 2, 9);
}

TEST_CASE("error: no main", "[sema][errors]") {
  auto c = compile("def f() { return 1; }\n");
  CHECK_FALSE(c->ok);
  CHECK(c->diags.find("[no-main]") != std::string::npos);
  expectError("def main(a) { }\n", "no-main", 1, 5);
}

TEST_CASE("error: each remaining sema diagnostic", "[sema][errors]") {
  const std::string m = kMesh;
  SECTION("unknown mesh") {
    expectError("@shmap(mesh=zz, in_specs=P(), out_specs=P())\ndef f(a) { return a; }\n"
                "def main() { print(f(1.0)); }\n",
                "unknown-mesh", 1, 13);
  }
  SECTION("spec count") {
    expectError(m + "@shmap(mesh=xy, in_specs=(P(), P()), out_specs=P())\ndef f(a) { return a; }\n"
                    "def main() { print(f(1.0)); }\n",
                "spec-count", 2, 26);
  }
  SECTION("shmap inside shmap") {
    expectError(m + "@shmap(mesh=xy, in_specs=P(), out_specs=P())\ndef f(a) { return a; }\n"
                    "@shmap(mesh=xy, in_specs=P(), out_specs=P())\ndef g(a) { return f(a); }\n"
                    "def main() { print(g(1.0)); }\n",
                "shmap-inside-shmap", 5, 19);
  }
  SECTION("shmap called from a plain function inside a shmap") {
    expectError(m + "@shmap(mesh=xy, in_specs=P(), out_specs=P())\ndef f(a) { return a; }\n"
                    "def g(a) { return f(a); }\n"
                    "@shmap(mesh=xy, in_specs=P(), out_specs=P())\ndef h(a) { return g(a); }\n"
                    "def main() { print(h(1.0)); }\n",
                "shmap-inside-shmap", 4, 19);
  }
  SECTION("print in a function called from a shmap body notes the calls") {
    auto c = compile(m + "def show(a) { print(a); return a; }\n"
                         "@shmap(mesh=xy, in_specs=P(), out_specs=P())\ndef f(a) { return show(a); }\n"
                         "def main() { print(f(1.0)); }\n");
    CHECK(c->diags.find("test.smp:2:15: error: print inside a shmap body [print-inside-shmap]") !=
          std::string::npos);
    CHECK(c->diags.find("test.smp:4:19: note: in the call to show here") != std::string::npos);
    CHECK(c->diags.find("test.smp:5:20: note: in the call to f here") != std::string::npos);
  }
  SECTION("print inside shmap") {
    expectError(m + "@shmap(mesh=xy, in_specs=P(), out_specs=P())\ndef f(a) { print(a); return a; }\n"
                    "def main() { print(f(1.0)); }\n",
                "print-inside-shmap", 3, 12);
  }
  SECTION("bad permutation") {
    expectError(m + "@shmap(mesh=xy, in_specs=P(), out_specs=P())\n"
                    "def f(a) { return ppermute(a, \"x\", perm=[(0, 1), (1, 1)]); }\n"
                    "def main() { print(f(1.0)); }\n",
                "bad-permutation", 3, 50, "device 1 is a destination twice");
  }
  SECTION("block type differs from the declared parameter type") {
    expectError(m + "@shmap(mesh=xy, in_specs=P(\"x\"), out_specs=P())\n"
                    "def f(a: f32[4]) { return 1.0; }\n"
                    "def main() { print(f(ones(f32[4]))); }\n",
                "argument-type", 4, 22, "gives per-device blocks f32[2]");
  }
  SECTION("argument type") {
    expectError("def f(a: f32[3]) { return a; }\ndef main() { print(f(ones(f32[4]))); }\n",
                "argument-type", 2, 22);
  }
  SECTION("return type and count") {
    expectError("def f(a) -> f32[3] { return a; }\ndef main() { print(f(ones(f32[4]))); }\n",
                "return-type", 1, 29);
    expectError("def f(a) -> (f32[4], f32[4]) { return a; }\ndef main() { print(f(ones(f32[4]))); }\n",
                "result-count", 1, 32);
  }
  SECTION("missing return") {
    expectError("def f(a) -> f32[4] { let b = a; }\ndef main() { print(f(ones(f32[4]))); }\n",
                "missing-return", 1, 5);
  }
  SECTION("recursion") {
    expectError("def f(a) { return g(a); }\ndef g(a) { return f(a); }\n"
                "def main() { print(f(1.0)); }\n",
                "recursion", 2, 19, "f -> g -> f");
  }
  SECTION("assignment changes the type") {
    expectError("def main() {\n  let a = ones(f32[4]);\n  a = ones(f32[3]);\n}\n", "assign-type", 3,
                3);
    expectError("def main() {\n  let a = ones(f32[4]);\n  for i in range(3) { a = a[0]; }\n}\n",
                "assign-type", 3, 23, "carried around the loop");
  }
  SECTION("condition not a scalar bool") {
    expectError("def main() {\n  let a = ones(f32[]);\n  if a { a = a; }\n}\n",
                "condition-not-bool", 3, 6);
  }
  SECTION("bad axis") {
    expectError("def main() {\n  print(sum(ones(f32[4]), axis=1));\n}\n", "bad-axis", 2, 32);
  }
  SECTION("index out of range") {
    expectError("def main() {\n  let a = ones(f32[4]);\n  print(a[4]);\n}\n",
                "index-out-of-range", 3, 11);
  }
  SECTION("bad reshape") {
    expectError("def main() {\n  print(reshape(ones(f32[4]), [3, 2]));\n}\n", "bad-reshape", 2,
                9, "(4 elements)");
  }
  SECTION("bad literal") {
    expectError("def main() {\n  print([[1, 2], [3]]);\n}\n", "bad-literal", 2, 18);
  }
  SECTION("matmul contracting dimensions") {
    expectError("def main() {\n  print(ones(f32[2,3]) @ ones(f32[4,5]));\n}\n", "shape-mismatch", 2,
                24, "contracting dimensions differ (3 vs 4)");
  }
  SECTION("return inside a loop") {
    expectError("def f(a) { for i in range(2) { return a; } return a; }\n"
                "def main() { print(f(1.0)); }\n",
                "return-in-control-flow", 1, 32);
  }
  SECTION("redefinition") {
    expectError("def f() { }\ndef f() { }\ndef main() { }\n", "redefinition", 2, 5);
  }
  SECTION("bad argument") {
    expectError("def main() {\n  print(sum(ones(f32[4]), axis=ones(i32[])));\n}\n", "bad-argument",
                2, 32);
  }
  SECTION("rank mismatch") {
    expectError("def main() {\n  print(dynamic_slice(ones(f32[4]), [0, 0], [2]));\n}\n",
                "rank-mismatch", 2, 37);
  }
}

TEST_CASE("error: module-level names", "[sema][errors]") {
  auto dup = compile(std::string(kMesh) + "import m;\ndef main() { }\n",
                     {{"m", "mesh xy = <[\"a\"=2]>;\n"}});
  CHECK_FALSE(dup->ok);
  CHECK(dup->diags.find("m.smp:1:6: error: mesh xy is defined twice [redefinition]") !=
        std::string::npos);
  expectError("def main() { print(nn.relu(1.0)); }\n", "unknown-function", 1, 20,
              "import nn;");
  auto missing = compile("import nn;\ndef main() { print(nn.rleu(1.0)); }\n",
                         {{"nn", "def relu(x) { return x; }\n"}});
  CHECK(missing->diags.find("did you mean nn.relu?") != std::string::npos);
}

// ---------------------------------------------------------------- robustness

TEST_CASE("odd programs are rejected or accepted without crashing", "[sema]") {
  const char *programs[] = {
      "def main() { }",
      "def main() { return; }",
      "def main() { let a = 1; a = 2.5; }",
      "def main() { print(1 + true); }",
      "def main() { print(-(-(-3))); }",
      "def main() { print(\"x\"); }",
      "def main() { let a = (\"x\", \"y\"); print(a); }",
      "def main() { print(ones(f32[2]) @ 2.0); }",
      "def main() { print(zeros(f32[0])); }",
      "def main() { for i in range(5, 2) { } }",
      "def main() { print(ones(f32[3])[1:1]); }",
      "def main() { print(ones(f32[3])[::-1]); }",
      "def main() { print(transpose(ones(f32[2,3]), [0, 0])); }",
      "def main() { print(reshape(ones(f32[4]), [-1, -1])); }",
      "def main() { print(concatenate([1.0, 2.0])); }",
      "def main() { print(sum(1.0)); }",
      "def main() { print(psum(1.0)); }",
      "def main() { print(main()); }",
      "def f(x) { return x, x; } def main() { print(f(1) + 1); }",
      "def main() { if true { } else { } }",
      "def main() { let x = 1; if x > 0 { let x = 2.0; } print(x); }",
      "def main() { print(iota(bool[3])); }",
      "def main() { print(full(f32[2], true)); }",
      "def main() { print(dynamic_slice(ones(f32[4]), [2.5], [2])); }",
  };
  for (const char *src : programs) {
    INFO(src);
    auto c = compile(src);
    if (!c->ok) CHECK(c->diags.find("error:") != std::string::npos);
  }
}

// Not run by default: `SEMA_DUMP=file.smp test_sema "[.dump]"` prints the IR of a program.
TEST_CASE("dump the IR of $SEMA_DUMP", "[.dump]") {
  const char *path = std::getenv("SEMA_DUMP");
  REQUIRE(path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto c = compile(text.str());
  std::cout << c->diags;
  if (c->ok) std::cout << ir::printModule(*c->module);
}
