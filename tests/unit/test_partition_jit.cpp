// Sharding propagation and partitioning of @jit functions: a mesh axis shards at most one
// dimension of each value (Shardy's invariant). Propagation keeps it whatever the
// priorities, and a partition spec that names an axis twice (a compiler bug) is an internal
// error located at the jit function, never a run-time one. Partitioning moves a value at its
// smallest shape, and once (a broadcast as its operand, a loop's constant before the loop).
#include "ir/IR.h"
#include "parser/Parser.h"
#include "passes/Passes.h"
#include "passes/jit/Jit.h"
#include "sema/Sema.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <set>
#include <sstream>

using namespace shmapc;

namespace {

struct Compiled {
  SourceManager sm;
  std::ostringstream out;
  Diagnostics diags{sm, out};
  std::vector<ast::Program> programs;
  std::unique_ptr<ir::Module> module;
};

// Compiles `src` as test.smp and runs the passes up to and including `last`.
std::unique_ptr<Compiled> upTo(const std::string &src, const char *last) {
  auto c = std::make_unique<Compiled>();
  c->programs.push_back(parseProgram(c->sm.addBuffer("test.smp", src), c->sm, c->diags));
  c->module = sema::buildModule({{"", &c->programs[0]}}, c->diags);
  for (const passes::Pass &p : passes::pipeline()) {
    p.run(*c->module, passes::PassOptions{}, c->diags);
    if (std::strcmp(p.name, last) == 0) break;
  }
  return c;
}

// Whether some value's propagated sharding names a mesh axis on two dimensions.
bool reusesAnAxis(const ir::JitFunc &j) {
  for (const auto &[v, s] : j.propagated) {
    std::vector<ir::AxisRef> seen;
    for (const ir::DimSharding &d : s.dims)
      for (const ir::AxisRef &a : d.axes) {
        for (const ir::AxisRef &b : seen)
          if (a.overlaps(b)) return true;
        seen.push_back(a);
      }
  }
  return false;
}

const char *kRowsLater = R"(mesh m = <["x"=2, "y"=2]>;
@jit(mesh=m, in_shardings=(sharding<@m, [{"x"}p1, {?}]>, sharding<@m, [{?}, {"x"}p0]>))
def f(a: f32[4, 4], b: f32[4, 4]) -> f32[4, 4] { return a + b; }
def main() { print(f(ones(f32[4, 4]), ones(f32[4, 4]))); }
)";

} // namespace

TEST_CASE("an open dimension never takes an axis a later priority wrote on another dimension") {
  auto c = upTo(kRowsLater, "propagate-shardings");
  REQUIRE(c->module->jits.size() == 1);
  const ir::JitFunc &j = c->module->jits[0];
  CHECK_FALSE(reusesAnAxis(j));
  // a keeps {"x"} on its rows; its open columns stay unsharded
  const ir::Value *a = j.func->params[0];
  REQUIRE(j.propagated.count(a));
  const ir::Sharding &s = j.propagated.at(a);
  REQUIRE(s.dims.size() == 2);
  CHECK(s.dims[0].axes.size() == 1);
  CHECK(s.dims[1].axes.empty());
}

TEST_CASE("a partition spec naming an axis twice is a located internal error") {
  auto c = upTo(kRowsLater, "propagate-shardings");
  ir::JitFunc &j = c->module->jits[0];
  // What propagation gave a's columns before it kept the invariant: a's rows' axis.
  ir::Sharding &s = j.propagated.at(j.func->params[0]);
  s.dims[1].axes = s.dims[0].axes;
  try {
    passes::partitionJit(*c->module, c->diags);
    FAIL("partitionJit accepted a partition spec that names \"x\" twice");
  } catch (const InternalError &e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.rfind("test.smp:3:5: ", 0) == 0);  // the jit function's name
    CHECK(what.find("names mesh axis \"x\" twice") != std::string::npos);
  }
}

namespace {

const ir::Func *funcNamed(const ir::Module &m, const std::string &name) {
  for (const auto &f : m.funcs)
    if (f->name == name) return f.get();
  return nullptr;
}

// The bytes a device puts into the all_gather_invariants of f: its block of each.
int64_t gatheredBytes(const ir::Func &f) {
  int64_t bytes = 0;
  for (const ir::Eqn &e : f.eqns)
    if (e.prim == ir::Prim::AllGatherInvariant) bytes += e.ins[0]->type.byteSize();
  return bytes;
}

} // namespace

TEST_CASE("a broadcast is moved as its operand where that is fewer bytes") {
  // x's rows split along x, v along y; the product's rows along x. v's block f32[4] (16 B) is
  // gathered over y and broadcast on each device; its broadcast block f32[2, 4] is 32 B.
  auto c = upTo(R"(mesh m = <["x"=2, "y"=2]>;
@jit(mesh=m, in_shardings=(P("x"), P("y")), out_shardings=P("x"))
def scaled(x: f32[4, 8], v: f32[8]) -> f32[4, 8] { return x * v; }
def main() { print(scaled(ones(f32[4, 8]), ones(f32[8]))); }
)", "partition-jit");
  const ir::Func *body = funcNamed(*c->module, "scaled_partitioned");
  REQUIRE(body);
  CHECK(gatheredBytes(*body) == 16);
  // (the broadcast of v's own block, made before the move, read by nothing and dropped)
  int broadcasts = 0;
  for (const ir::Eqn &e : body->eqns) broadcasts += e.prim == ir::Prim::BroadcastInDim;
  CHECK(broadcasts == 1);
}

TEST_CASE("a loop's constant is moved once, before the loop") {
  // b's rows along y, the carry's along x: b's block f32[2, 8] (64 B) gathered once in the
  // shmap body, none in the loop's body, which reads the moved block as a constant.
  auto c = upTo(R"(mesh m = <["x"=2, "y"=2]>;
@jit(mesh=m, in_shardings=(P("x"), P("y")), out_shardings=P("x"))
def looped(h0: f32[4, 8], b: f32[4, 8]) -> f32[4, 8] {
  let h = h0;
  for k in range(3) { h = tanh(h + b); }
  return h;
}
def main() { print(looped(ones(f32[4, 8]), ones(f32[4, 8]))); }
)", "partition-jit");
  const ir::Func *body = funcNamed(*c->module, "looped_partitioned");
  REQUIRE(body);
  CHECK(gatheredBytes(*body) == 64);
  const ir::Eqn *loop = nullptr;
  for (const ir::Eqn &e : body->eqns)
    if (e.prim == ir::Prim::Loop) loop = &e;
  REQUIRE(loop);
  CHECK(loop->intParam("num_consts") == 1);
  CHECK(gatheredBytes(*loop->bodies[0]) == 0);
}
