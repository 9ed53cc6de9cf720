// hoist-loop-reductions (passes/reductions/HoistLoopReductions.cpp) on backward bodies built by hand, mesh
// x=2, y=2: a loop whose carry accumulates psum2s of a device-varying const. What it moves
// out of the loop, the variance types it gives (checked by re-inferring them), and what it
// must leave as written.
#include "ir/IR.h"
#include "passes/Passes.h"
#include "passes/reductions/Reductions.h"
#include "passes/variance/Variance.h"
#include "rules/Rules.h"

#include <catch2/catch.hpp>

#include <sstream>

using namespace shmapc;
using namespace shmapc::ir;

namespace {

constexpr AxisSet X = 1, Y = 2;

Type f32(std::vector<int64_t> shape, AxisSet vary = 0) { return Type{DType::F32, shape, vary}; }
Type i32() { return Type{DType::I32, {}, 0}; }

std::vector<int64_t> axes(std::initializer_list<int64_t> a) { return a; }

struct Setup {
  Module m;
  Func *f = nullptr;     // the backward body
  Func *body = nullptr;  // its loop's body
  Value *c = nullptr;    // f's param: the const the body sums, f32[4]{x}
  Value *init = nullptr, *acc = nullptr;  // the carry's initial value and the loop's result
  Value *cb = nullptr, *carry = nullptr, *sum = nullptr;  // in the body
};

Eqn constant(Value *out, double v) { return Eqn{Prim::Constant, {}, {out}, {{"value", std::vector<double>{v}}}, {}, {}}; }

// f(c: f32[4]{x}[, init]) = loop[0, trips](carry = init or zeros) { carry + psum2[x](c) }: the
// body's result is `result(body)` when given (built from the body's values), else carry + sum.
std::unique_ptr<Setup> setup(int64_t trips, bool zeroInit = true, bool backward = true,
                             std::vector<int64_t> carryShape = {4}) {
  auto s = std::make_unique<Setup>();
  s->m.meshes.push_back(std::make_unique<Mesh>(Mesh{"m", {"x", "y"}, {2, 2}, {}}));
  const Mesh *mesh = s->m.meshes[0].get();
  Func *f = s->f = s->m.newFunc("w_vjp");
  f->mesh = mesh;
  f->isShmapBody = true;
  f->isBackward = backward;
  s->c = f->newValue(f32({4}, X), "c");
  f->params.push_back(s->c);
  if (zeroInit) {
    s->init = f->newValue(f32(carryShape));
    f->eqns.push_back(constant(s->init, 0.0));
  } else {
    s->init = f->newValue(f32(carryShape), "init");
    f->params.push_back(s->init);
  }
  Func *b = s->body = s->m.newFunc("w_vjp_loop");
  b->mesh = mesh;
  b->isNested = true;
  b->params.push_back(b->newValue(i32(), "i"));
  s->cb = b->newValue(f32({4}, X), "c");
  s->carry = b->newValue(f32(carryShape), "acc");
  b->params.push_back(s->cb);
  b->params.push_back(s->carry);
  s->sum = b->newValue(f32({4}));
  b->eqns.push_back(Eqn{Prim::Psum2, {s->cb}, {s->sum}, {{"axes", axes({0})}}, {}, {}});
  s->acc = f->newValue(f32(carryShape), "acc");
  f->eqns.push_back(Eqn{Prim::Loop, {s->c, s->init}, {s->acc},
                        {{"lo", int64_t(0)}, {"hi", trips}, {"num_consts", int64_t(1)}}, {b}, {}});
  f->results.push_back(s->acc);
  return s;
}

// The body's result: carry + sum.
void addToCarry(Setup &s) {
  Value *r = s.body->newValue(f32({4}));
  s.body->eqns.push_back(Eqn{Prim::Add, {s.carry, s.sum}, {r}, {}, {}, {}});
  s.body->results = {r};
}

void run(Setup &s) {
  std::ostringstream out;
  SourceManager sm;
  Diagnostics diags{sm, out};
  passes::hoistLoopReductions(s.m, diags);
}

std::string eqnPrims(const Func &f) {
  std::string s;
  for (const Eqn &e : f.eqns) s += std::string(s.empty() ? "" : " ") + primName(e.prim);
  return s;
}

void collect(Func &f, std::vector<std::pair<Value *, Type>> &out) {
  for (Value *p : f.params) out.push_back({p, p->type});
  for (Eqn &e : f.eqns) {
    for (Value *v : e.outs) out.push_back({v, v->type});
    for (Func *b : e.bodies) collect(*b, out);
  }
}

// The IR is well formed, and inferring the variance types again from f's params gives every
// value the type the pass gave it. (Inference also lifts a dynamic_update_slice's indices to
// its operands' variance, which autodiff's own updates leave invariant: a pbroadcast of an
// index changes nothing, so those are not compared.)
void checkTypes(Setup &s) {
  for (const std::string &problem : shmapc::rules::verifyModule(s.m))
    if (problem != "module has no main") FAIL(problem);  // (a body alone)
  std::vector<std::pair<Value *, Type>> types;
  collect(*s.f, types);
  std::vector<AxisSet> vary;
  for (const Value *p : s.f->params) vary.push_back(p->type.vary);
  SourceManager sm;
  REQUIRE(passes::retypeWithParams(*s.f, vary, sm));
  for (auto &[v, t] : types) {
    INFO("value " << v->id << (v->hint.empty() ? "" : " (" + v->hint + ")"));
    CHECK(typeToString(v->type, s.f->mesh) == typeToString(t, s.f->mesh));
  }
}

} // namespace

TEST_CASE("hoist-loop-reductions: a sum accumulated in a carry is taken after the loop", "[hoist]") {
  auto s = setup(3);
  addToCarry(*s);
  run(*s);
  REQUIRE(eqnPrims(*s->f) == "constant pbroadcast loop psum2");  // (the old zero is gone)
  CHECK(eqnPrims(*s->body) == "add");
  const Eqn &loop = s->f->eqns[2], &sum = s->f->eqns[3];
  CHECK(s->f->eqns[1].outs[0]->type == f32({4}, X));  // the zero each device starts from
  CHECK(loop.ins[1] == s->f->eqns[1].outs[0]);
  CHECK(s->carry->type == f32({4}, X));
  CHECK(s->body->eqns[0].ins[1] == s->cb);  // the unreduced contribution
  CHECK(loop.outs[0]->type == f32({4}, X));
  CHECK(sum.ins[0] == loop.outs[0]);
  CHECK(sum.intsParam("axes") == axes({0}));
  CHECK(sum.outs[0] == s->acc);  // the loop's old result keeps its value and type
  CHECK(s->acc->type == f32({4}));
  CHECK(s->f->results[0] == s->acc);
  checkTypes(*s);
}

TEST_CASE("hoist-loop-reductions: a carry that does not start at zero", "[hoist]") {
  auto s = setup(3, /*zeroInit=*/false);
  addToCarry(*s);
  run(*s);
  REQUIRE(eqnPrims(*s->f) == "constant pbroadcast loop psum2 add");
  const Eqn &add = s->f->eqns[4];
  CHECK(add.ins[0] == s->init);  // its initial value plus the sum
  CHECK(add.ins[1] == s->f->eqns[3].outs[0]);
  CHECK(add.outs[0] == s->acc);
  checkTypes(*s);
}

TEST_CASE("hoist-loop-reductions: a slice written into a zero array, times a factor", "[hoist]") {
  // carry f32[3,4] += dynamic_update_slice(zeros, reshape(sum * 0.5), [i, 0]): 3 iterations
  // of f32[4] summed = the carry's 12 elements.
  auto s = setup(3, true, true, {3, 4});
  Func &b = *s->body;
  Value *half = b.newValue(f32({4}));
  b.eqns.push_back(constant(half, 0.5));
  Value *scaled = b.newValue(f32({4}));
  b.eqns.push_back(Eqn{Prim::Mul, {s->sum, half}, {scaled}, {}, {}, {}});
  Value *row = b.newValue(f32({1, 4}));
  b.eqns.push_back(Eqn{Prim::Reshape, {scaled}, {row}, {}, {}, {}});
  Value *zeros = b.newValue(f32({3, 4})), *zero = b.newValue(i32());
  b.eqns.push_back(constant(zeros, 0.0));
  b.eqns.push_back(constant(zero, 0.0));
  Value *placed = b.newValue(f32({3, 4}));
  b.eqns.push_back(Eqn{Prim::DynamicUpdateSlice, {zeros, row, b.params[0], zero}, {placed}, {}, {}, {}});
  Value *r = b.newValue(f32({3, 4}));
  b.eqns.push_back(Eqn{Prim::Add, {s->carry, placed}, {r}, {}, {}, {}});
  b.results = {r};
  run(*s);
  REQUIRE(eqnPrims(*s->f) == "constant pbroadcast loop psum2");
  // the factor and the zeros lifted where they are read
  CHECK(eqnPrims(b) == "constant pbroadcast mul reshape constant constant pbroadcast dynamic_update_slice add");
  CHECK(placed->type == f32({3, 4}, X));
  checkTypes(*s);
}

namespace {

// Makes the setup's f the body of a loop of `trips` iterations in a new backward body (which
// becomes s.f), returning the old f. `addCarry`: f gets a carry param `outer` and returns
// outer + its inner loop's result (a long loop's blocks look so); otherwise f's first param
// after c is the carry and its result the inner loop's.
Func *wrapInLoop(Setup &s, int64_t trips, bool addCarry) {
  Func *f = s.f;
  Func *outer = s.m.newFunc("w_vjp");
  outer->mesh = f->mesh;
  outer->isShmapBody = true;
  outer->isBackward = true;
  f->isShmapBody = false;
  f->isBackward = false;
  f->isNested = true;
  f->params.insert(f->params.begin(), f->newValue(i32(), "j"));
  const Type carry = s.acc->type;
  if (addCarry) {
    Value *p = f->newValue(carry, "outer"), *r = f->newValue(carry);
    f->params.push_back(p);
    f->eqns.push_back(Eqn{Prim::Add, {p, s.acc}, {r}, {}, {}, {}});
    f->results = {r};
  }
  Value *c = outer->newValue(f32({4}, X), "c"), *zeros = outer->newValue(carry);
  outer->params.push_back(c);
  outer->eqns.push_back(constant(zeros, 0.0));
  Value *acc = outer->newValue(carry);
  outer->eqns.push_back(
      Eqn{Prim::Loop, {c, zeros}, {acc}, {{"lo", int64_t(0)}, {"hi", trips}, {"num_consts", int64_t(1)}}, {f}, {}});
  outer->results.push_back(acc);
  s.f = outer;
  return f;
}

// The body's result: carry + dynamic_update_slice(zeros f32[8], sum, [i]): 16 of the carry's
// 32 bytes summed per iteration.
void addSliceToCarry(Setup &s) {
  Func &b = *s.body;
  Value *zeros = b.newValue(f32({8})), *placed = b.newValue(f32({8})), *r = b.newValue(f32({8}));
  b.eqns.push_back(constant(zeros, 0.0));
  b.eqns.push_back(Eqn{Prim::DynamicUpdateSlice, {zeros, s.sum, b.params[0]}, {placed}, {}, {}, {}});
  b.eqns.push_back(Eqn{Prim::Add, {s.carry, placed}, {r}, {}, {}, {}});
  b.results = {r};
}

} // namespace

TEST_CASE("hoist-loop-reductions: nested loops, the inner sum leaves both", "[hoist]") {
  // outer: loop[0,2](acc = 0) { f: loop[0,3](acc) { acc + psum2[x](c) } }
  auto s = setup(3, /*zeroInit=*/false);
  addToCarry(*s);
  Func *inner = s->body, *f = wrapInLoop(*s, 2, false);
  Value *acc = s->f->results[0];
  run(*s);
  CHECK(eqnPrims(*inner) == "add");
  CHECK(eqnPrims(*f) == "constant pbroadcast loop add");  // the inner loop's sum left f too
  REQUIRE(eqnPrims(*s->f) == "constant pbroadcast loop psum2");
  CHECK(s->f->eqns[3].outs[0] == acc);
  checkTypes(*s);
}

TEST_CASE("hoist-loop-reductions: a sum that adds bytes after the inner loop leaves both", "[hoist]") {
  // outer: loop[0,2](acc = 0) { f: acc + loop[0,1](zeros) { carry + dus(zeros, psum2[x](c), i) } }
  // After the inner loop alone: 32 B summed per run of f where 16 B were. After both: 32 B
  // per run of the outer body, where 2 x 16 B were.
  auto s = setup(1, true, true, {8});
  addSliceToCarry(*s);
  Func *inner = s->body, *f = wrapInLoop(*s, 2, true);
  run(*s);
  CHECK(eqnPrims(*inner) == "constant pbroadcast dynamic_update_slice add");
  CHECK(eqnPrims(*f) == "constant pbroadcast loop add");
  REQUIRE(eqnPrims(*s->f) == "constant pbroadcast loop psum2");
  checkTypes(*s);
}

TEST_CASE("hoist-loop-reductions: ... and stays where only the inner loop would take it", "[hoist]") {
  // The same, but f also reads the inner loop's result (tanh): the sum after the inner loop
  // would stay in f, 32 B per iteration of the outer loop where 16 B were, so nothing moves.
  auto s = setup(1, true, true, {8});
  addSliceToCarry(*s);
  Value *innerAcc = s->acc;
  Func *inner = s->body, *f = wrapInLoop(*s, 2, true);
  Value *t = f->newValue(f32({8}));
  f->eqns.push_back(Eqn{Prim::Tanh, {innerAcc}, {t}, {}, {}, {}});
  f->results.push_back(t);
  // (the outer loop gets a second carry for it)
  Value *z2 = s->f->newValue(f32({8})), *out2 = s->f->newValue(f32({8}));
  f->params.push_back(f->newValue(f32({8}), "unused"));
  s->f->eqns.insert(s->f->eqns.begin(), constant(z2, 0.0));
  s->f->eqns[2].ins.push_back(z2);
  s->f->eqns[2].outs.push_back(out2);
  const std::string before = printFunc(*s->f);
  run(*s);
  CHECK(eqnPrims(*inner) == "psum2 constant dynamic_update_slice add");
  CHECK(printFunc(*s->f) == before);
  checkTypes(*s);
}

TEST_CASE("hoist-loop-reductions: a sum after the loop that the body adds to others", "[hoist]") {
  // f: acc = loop[0,1](zeros f32[8]) { carry + dus(zeros, psum2[x](c), i) };
  //    r = acc + dus(zeros, psum2[x](c), 4)
  // After the loop alone the sum would be of 32 B where the loop summed 16 B; with the other
  // 16 B slice summed after it, one sum of r (32 B) replaces both.
  auto s = setup(1, true, true, {8});
  addSliceToCarry(*s);
  Func &f = *s->f;
  Value *sum = f.newValue(f32({4})), *zeros = f.newValue(f32({8})), *four = f.newValue(i32());
  Value *placed = f.newValue(f32({8})), *r = f.newValue(f32({8}), "r");
  f.eqns.push_back(Eqn{Prim::Psum2, {s->c}, {sum}, {{"axes", axes({0})}}, {}, {}});
  f.eqns.push_back(constant(zeros, 0.0));
  f.eqns.push_back(constant(four, 4.0));
  f.eqns.push_back(Eqn{Prim::DynamicUpdateSlice, {zeros, sum, four}, {placed}, {}, {}, {}});
  f.eqns.push_back(Eqn{Prim::Add, {s->acc, placed}, {r}, {}, {}, {}});
  f.results = {r};
  SECTION("both sums become one of r") {
    run(*s);
    CHECK(eqnPrims(*s->body) == "constant pbroadcast dynamic_update_slice add");
    REQUIRE(eqnPrims(f) ==
            "constant pbroadcast loop constant constant pbroadcast dynamic_update_slice add psum2");
    CHECK(f.eqns.back().outs[0] == r);  // r keeps its value and type
    CHECK(r->type == f32({8}));
    CHECK(f.results[0] == r);
    checkTypes(*s);
  }
  SECTION("left where the sum after the loop would be larger than what it joins") {
    // (r also read otherwise: its chain may not end there, and the loop's sum alone adds bytes)
    Value *t = f.newValue(f32({8}));
    f.eqns.push_back(Eqn{Prim::Tanh, {s->acc}, {t}, {}, {}, {}});
    f.results.push_back(t);
    const std::string before = printFunc(f);
    run(*s);
    CHECK(printFunc(f) == before);
    CHECK(eqnPrims(*s->body) == "psum2 constant dynamic_update_slice add");
  }
}

TEST_CASE("hoist-loop-reductions: what is left as written", "[hoist]") {
  SECTION("a carry bigger than the sums it would replace") {
    // carry f32[16] += pad-like update of f32[4] per iteration, 3 iterations: 64 > 48 bytes
    auto s = setup(3, true, true, {16});
    Func &b = *s->body;
    Value *zeros = b.newValue(f32({16})), *zero = b.newValue(i32());
    b.eqns.push_back(constant(zeros, 0.0));
    b.eqns.push_back(constant(zero, 0.0));
    Value *placed = b.newValue(f32({16})), *r = b.newValue(f32({16}));
    b.eqns.push_back(Eqn{Prim::DynamicUpdateSlice, {zeros, s->sum, zero}, {placed}, {}, {}, {}});
    b.eqns.push_back(Eqn{Prim::Add, {s->carry, placed}, {r}, {}, {}, {}});
    b.results = {r};
    run(*s);
    CHECK(eqnPrims(*s->f) == "constant loop");
    CHECK(eqnPrims(b) == "psum2 constant constant dynamic_update_slice add");
  }
  SECTION("a carry the body also reads otherwise") {
    auto s = setup(3);
    Func &b = *s->body;
    Value *sq = b.newValue(f32({4})), *r = b.newValue(f32({4}));
    b.eqns.push_back(Eqn{Prim::Mul, {s->carry, s->carry}, {sq}, {}, {}, {}});
    b.eqns.push_back(Eqn{Prim::Add, {sq, s->sum}, {r}, {}, {}, {}});
    b.results = {r};
    run(*s);
    CHECK(eqnPrims(*s->f) == "constant loop");
  }
  SECTION("a sum something else reads") {
    auto s = setup(3);
    Func &b = *s->body;
    Value *t = b.newValue(f32({4})), *r = b.newValue(f32({4}));
    b.eqns.push_back(Eqn{Prim::Tanh, {s->sum}, {t}, {}, {}, {}});
    b.eqns.push_back(Eqn{Prim::Add, {s->carry, s->sum}, {r}, {}, {}, {}});
    b.results = {r};
    run(*s);  // (the loop's result is not even used by the tanh: the sum is still read)
    CHECK(eqnPrims(b) == "psum2 tanh add");
  }
  SECTION("an affine update: a constant added each iteration would be summed n times") {
    auto s = setup(3);
    Func &b = *s->body;
    Value *one = b.newValue(f32({4})), *t = b.newValue(f32({4})), *r = b.newValue(f32({4}));
    b.eqns.push_back(constant(one, 1.0));
    b.eqns.push_back(Eqn{Prim::Add, {s->sum, one}, {t}, {}, {}, {}});
    b.eqns.push_back(Eqn{Prim::Add, {s->carry, t}, {r}, {}, {}, {}});
    b.results = {r};
    run(*s);
    CHECK(eqnPrims(*s->f) == "constant loop");
  }
  SECTION("sums over different axes") {
    // carry + (psum2[x](c) + psum2[y](pbroadcast[y](2)))
    auto s = setup(3);
    Func &b = *s->body;
    Value *two = b.newValue(f32({4})), *ty = b.newValue(f32({4}, Y)), *sy = b.newValue(f32({4}));
    b.eqns.push_back(constant(two, 2.0));
    b.eqns.push_back(Eqn{Prim::Pbroadcast, {two}, {ty}, {{"axes", axes({1})}}, {}, {}});
    b.eqns.push_back(Eqn{Prim::Psum2, {ty}, {sy}, {{"axes", axes({1})}}, {}, {}});
    Value *t = b.newValue(f32({4})), *r = b.newValue(f32({4}));
    b.eqns.push_back(Eqn{Prim::Add, {s->sum, sy}, {t}, {}, {}, {}});
    b.eqns.push_back(Eqn{Prim::Add, {s->carry, t}, {r}, {}, {}, {}});
    b.results = {r};
    run(*s);
    CHECK(eqnPrims(*s->f) == "constant loop");
    CHECK(eqnPrims(b) == "psum2 constant pbroadcast psum2 add add");
  }
  SECTION("a forward body (the user's communication)") {
    auto s = setup(3, true, /*backward=*/false);
    addToCarry(*s);
    run(*s);
    CHECK(eqnPrims(*s->f) == "constant loop");
    CHECK(eqnPrims(*s->body) == "psum2 add");
  }
}
