// sink-reductions (passes/reductions/SinkReductions.cpp) on backward bodies built by hand, mesh x=2, y=2:
// what it rewrites, the variance types it keeps, and what it must leave as written.
#include "ir/IR.h"
#include "passes/Passes.h"
#include "passes/reductions/Reductions.h"

#include <catch2/catch.hpp>

#include <sstream>

using namespace shmapc;
using namespace shmapc::ir;

namespace {

constexpr AxisSet X = 1, Y = 2;

Type f32(std::vector<int64_t> shape, AxisSet vary = 0) { return Type{DType::F32, shape, vary}; }

std::vector<int64_t> axes(std::initializer_list<int64_t> a) { return a; }

struct Body {
  Module m;
  Func *f = nullptr;
  Value *c = nullptr, *s = nullptr, *p = nullptr;
};

// (c: f32[4,4], untiled f32[n,4] for the n devices of B, varying over `cVary`) -> pscatter[B, axis=0, tiled](psum2[A](c)).
std::unique_ptr<Body> body(std::vector<int64_t> A, std::vector<int64_t> B, bool tiled, AxisSet cVary,
                           bool backward = true) {
  auto b = std::make_unique<Body>();
  b->m.meshes.push_back(std::make_unique<Mesh>(Mesh{"m", {"x", "y"}, {2, 2}, {}}));
  Func *f = b->f = b->m.newFunc("w_vjp");
  f->mesh = b->m.meshes[0].get();
  f->isShmapBody = true;
  f->isBackward = backward;
  int64_t n = 1;
  for (size_t k = 0; k < B.size(); ++k) n *= 2;
  // (untiled: dimension 0 has one row per device of B)
  std::vector<int64_t> shape = {tiled ? 4 : n, 4};
  b->c = f->newValue(f32(shape, cVary), "c");
  f->params.push_back(b->c);
  AxisSet a = 0, bs = 0;
  for (int64_t k : A) a |= AxisSet(1) << k;
  for (int64_t k : B) bs |= AxisSet(1) << k;
  b->s = f->newValue(f32(shape, cVary & ~a));
  std::vector<int64_t> out = tiled ? std::vector<int64_t>{4 / n, 4} : std::vector<int64_t>{4};
  b->p = f->newValue(f32(out, (cVary & ~a) | bs));
  f->eqns.push_back(Eqn{Prim::Psum2, {b->c}, {b->s}, {{"axes", A}}, {}, {}});
  f->eqns.push_back(Eqn{Prim::Pscatter, {b->s}, {b->p}, {{"axes", B}, {"axis", int64_t(0)}, {"tiled", int64_t(tiled)}}, {}, {}});
  f->results.push_back(b->p);
  return b;
}

void run(Body &b) {
  std::ostringstream out;
  SourceManager sm;
  Diagnostics diags{sm, out};
  passes::sinkReductions(b.m, diags);
}

std::string prims(const Func &f) {
  std::string s;
  for (const Eqn &e : f.eqns) s += std::string(s.empty() ? "" : " ") + primName(e.prim);
  return s;
}

} // namespace

TEST_CASE("sink-reductions: axes kept outside the sum slice first", "[sink]") {
  auto b = body(axes({0}), axes({1}), true, X);  // summed over x, kept by y
  run(*b);
  REQUIRE(prims(*b->f) == "pscatter psum2");
  const Eqn &slice = b->f->eqns[0], &sum = b->f->eqns[1];
  CHECK(slice.ins[0] == b->c);
  CHECK(slice.intsParam("axes") == axes({1}));
  CHECK(slice.outs[0]->type == f32({2, 4}, X | Y));
  CHECK(sum.intsParam("axes") == axes({0}));
  CHECK(sum.outs[0] == b->p);  // the result keeps its value and type: f32[2,4]{y}
  CHECK(b->p->type == f32({2, 4}, Y));
  CHECK(b->f->results[0] == b->p);
}

TEST_CASE("sink-reductions: the same axes become a psum_scatter", "[sink]") {
  auto b = body(axes({0, 1}), axes({0, 1}), true, X | Y);
  run(*b);
  REQUIRE(prims(*b->f) == "psum_scatter");
  const Eqn &rs = b->f->eqns[0];
  CHECK(rs.intsParam("axes") == axes({0, 1}));  // (one run: the block index over (x, y))
  CHECK(rs.intParam("scatter_dimension") == 0);
  CHECK(rs.intParam("tiled") == 1);
  CHECK(rs.outs[0] == b->p);
  CHECK(b->p->type == f32({1, 4}, X | Y));
}

TEST_CASE("sink-reductions: an untiled block of axes outside the sum", "[sink]") {
  auto b = body(axes({1}), axes({0}), false, Y);  // summed over y, row x_index kept
  run(*b);
  REQUIRE(prims(*b->f) == "pscatter psum2");
  CHECK(b->f->eqns[0].intParam("tiled") == 0);
  CHECK(b->f->eqns[0].outs[0]->type == f32({4}, X | Y));
  CHECK(b->p->type == f32({4}, X));
}

TEST_CASE("sink-reductions: what is left as written", "[sink]") {
  SECTION("an untiled block over axes partly summed (one row: no refining it)") {
    auto b = body(axes({0}), axes({0, 1}), false, X);
    run(*b);
    CHECK(prims(*b->f) == "psum2 pscatter");
  }
  SECTION("a sum something else reads") {
    auto b = body(axes({0}), axes({1}), true, X);
    b->f->results.push_back(b->s);
    run(*b);
    CHECK(prims(*b->f) == "psum2 pscatter");
  }
  SECTION("a forward body (the user's communication)") {
    auto b = body(axes({0}), axes({1}), true, X, false);
    run(*b);
    CHECK(prims(*b->f) == "psum2 pscatter");
  }
  SECTION("a body without variance types") {
    auto b = body(axes({0}), axes({1}), true, X);
    b->f->checkVma = false;
    run(*b);
    CHECK(prims(*b->f) == "psum2 pscatter");
  }
}
