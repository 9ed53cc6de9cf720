// The higher-order primitives (bodies in Eqn::bodies). Their rules are whole
// algorithms, each in its own file: variance in passes/variance/InsertPbroadcasts.cpp; jvp and
// transpose of shmap in passes/ad/Shmap.cpp, of loop in passes/ad/Loop.cpp, of cond in
// passes/ad/Cond.cpp; lowering in codegen/ControlFlow.cpp. Call is inlined and jvp/vjp are
// differentiated away before autodiff and codegen see them.
#include "prims/Prim.h"

#include <algorithm>
#include <cstdint>

namespace shmapc::prims {

namespace {

std::vector<const Type *> typesOf(const std::vector<Value *> &vs, size_t from = 0, size_t to = SIZE_MAX) {
  std::vector<const Type *> out;
  for (size_t i = from; i < vs.size() && i < to; ++i) out.push_back(&vs[i]->type);
  return out;
}

bool outsAre(ShapeCtx &c, const std::vector<const Type *> &types) {
  for (const Type *t : types) c.out(*t);
  return true;
}

std::string named(const char *what, const Func &body) { return std::string(what) + " @" + body.name; }

// Loop and while: `num_consts` leading operands are constants, the rest the carries' initial
// values; the results are the final carries.
bool carries(ShapeCtx &c, size_t &consts) {
  int64_t n;
  if (!c.param("num_consts", n)) return false;
  if (n < 0 || (size_t)n > c.numIns()) return c.fail("num_consts " + std::to_string(n) + " exceeds the operands");
  consts = (size_t)n;
  return true;
}

} // namespace

template <> const Rules &define<Prim::Call>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // the callee's signature
        if (c.e.bodies.size() != 1) return c.fail("needs one callee");
        const Func &callee = *c.e.bodies[0];
        return c.paramsMatch(callee, typesOf(c.e.ins), named("callee", callee)) && outsAre(c, typesOf(callee.results));
      },
      .variance = VarianceRule::Call,
      .jvp = noTangent,  // inlined before autodiff (flattenInto)
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitCall(fe.f.eqns[i]); },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

// A shmap transposes to a shmap with in_specs and out_specs swapped; its vjp is a forward
// shmap returning residuals and a backward one reading them.
template <> const Rules &define<Prim::Shmap>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        // The body's params are the operands' blocks under in_specs (each dimension divided by the
        // sizes of the mesh axes splitting it); the results are the body's result blocks put back
        // together under out_specs (multiplied by them).
        if (c.e.bodies.size() != 1 || !c.e.bodies[0]->mesh) return c.fail("needs a body with a mesh");
        if (c.f.mesh) return c.fail("shmap inside a function with a mesh");
        const Func &body = *c.e.bodies[0];
        const Mesh &mesh = *body.mesh;
        std::vector<PartitionSpec> inSpecs, outSpecs;
        if (!c.param("in_specs", inSpecs) || !c.param("out_specs", outSpecs)) return false;
        if (inSpecs.size() != c.numIns() || outSpecs.size() != body.results.size())
          return c.fail("needs one in_spec per operand and one out_spec per result of @" + body.name);
        std::vector<Type> blocks(c.numIns());
        for (size_t k = 0; k < c.numIns(); ++k)
          if (!c.block(c.in(k), inSpecs[k], mesh, "operand " + std::to_string(k), blocks[k])) return false;
        std::vector<const Type *> blockTypes;
        for (const Type &t : blocks) blockTypes.push_back(&t);
        if (!c.paramsMatch(body, blockTypes, named("body", body))) return false;
        for (size_t k = 0; k < outSpecs.size(); ++k) {
          Type global = body.results[k]->type, check;
          for (size_t d = 0; d < outSpecs[k].dims.size() && d < global.shape.size(); ++d)
            for (int a : outSpecs[k].dims[d])
              if (a >= 0 && a < (int)mesh.sizes.size() && !scaleDim(global.shape[d], mesh.sizes[a]))
                return c.fail("result " + std::to_string(k) + "'s global size overflows");
          if (!c.block(global, outSpecs[k], mesh, "result " + std::to_string(k), check)) return false;
          c.out(global);
        }
        return true;
      },
      .variance = VarianceRule::Shmap,
      .jvp = [](JvpCtx &c) { c.L.shmapRule(c.e); },
      .transpose = [](TransposeCtx &c) { c.T.shmapRule(c.le); },
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitShmap(fe.f.eqns[i]); },
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

// In a jit function (FactorRule::Nested): a loop's constant is one array with the bodies'
// parameter for it; a carry with the bodies' parameters for it, the body's result for it and
// the loop's result (the sharding it has must hold at every iteration). A conditional's
// operand is one with each branch's parameter for it, its result with each branch's result.
namespace {

int numConsts(const Eqn &e) { return (int)e.intParam("num_consts"); }

FactorRule loopTies(const Eqn &e) {
  FactorRule r{FactorRule::Nested, {}, {}, nullptr};
  const int consts = numConsts(e), first = e.prim == Prim::Loop ? 1 : 0;  // (a loop's body takes i first)
  const int body = (int)e.bodies.size() - 1;
  for (int k = 0; k < (int)e.ins.size(); ++k) {
    std::vector<Tied> group = {{Tied::In, k}};
    for (int b = 0; b <= body; ++b) group.push_back({Tied::Param, k + (b == body ? first : 0), b});
    if (k >= consts) group.insert(group.end(), {{Tied::Result, k - consts, body}, {Tied::Out, k - consts}});
    r.ties.push_back(group);
  }
  return r;
}

FactorRule condTies(const Eqn &e) {
  FactorRule r{FactorRule::Nested, {}, {}, nullptr};
  for (int k = 1; k < (int)e.ins.size(); ++k) r.ties.push_back({{Tied::In, k}, {Tied::Param, k - 1, 0}, {Tied::Param, k - 1, 1}});
  for (int k = 0; k < (int)e.outs.size(); ++k) r.ties.push_back({{Tied::Out, k}, {Tied::Result, k, 0}, {Tied::Result, k, 1}});
  return r;
}

} // namespace

template <> const Rules &define<Prim::Loop>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // body (i: i32[], consts..., carries...) -> carries
        size_t consts;
        int64_t lo, hi;
        if (!c.param("lo", lo) || !c.param("hi", hi) || !carries(c, consts)) return false;
        if (c.e.bodies.size() != 1) return c.fail("needs one body");
        const Func &body = *c.e.bodies[0];
        Type index{DType::I32, {}, 0};
        std::vector<const Type *> params = {&index};
        for (const Type *t : typesOf(c.e.ins)) params.push_back(t);
        std::vector<const Type *> carried = typesOf(c.e.ins, consts);
        return c.paramsMatch(body, params, named("body", body)) && c.resultsMatch(body, carried, named("body", body)) &&
               outsAre(c, carried);
      },
      .variance = VarianceRule::Loop,
      .jvp = [](JvpCtx &c) { c.L.loopRule(c.e); },
      .transpose = [](TransposeCtx &c) { c.T.loopRule(c.le); },
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitLoop(fe.f.eqns[i]); },
      .scalar = nullptr,
      .sharding = loopTies,
      .comm = communicatesNothing,
  };
  return r;
}

// A while loop's trip count depends on data: its jvp is a while over primals and tangents,
// and it has no transpose (reverse mode would need every iteration's carries, and how many
// there are is known only at run time: ad/Loop.cpp says so with a located error).
template <> const Rules &define<Prim::While>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // predicate (consts..., carries...) -> bool[]; body -> carries
        size_t consts;
        if (!carries(c, consts)) return false;
        if (c.e.bodies.size() != 2) return c.fail("needs a predicate and a body");
        const Func &pred = *c.e.bodies[0], &body = *c.e.bodies[1];
        Type boolScalar{DType::Bool, {}, 0};
        std::vector<const Type *> ins = typesOf(c.e.ins), carried = typesOf(c.e.ins, consts);
        return c.paramsMatch(pred, ins, named("predicate", pred)) &&
               c.resultsMatch(pred, {&boolScalar}, named("predicate", pred)) &&
               c.paramsMatch(body, ins, named("body", body)) && c.resultsMatch(body, carried, named("body", body)) &&
               outsAre(c, carried);
      },
      .variance = VarianceRule::While,
      .jvp = [](JvpCtx &c) { c.L.whileRule(c.e); },
      .transpose = notLinear,
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitWhile(fe.f.eqns[i]); },
      .scalar = nullptr,
      .sharding = loopTies,
      .comm = communicatesNothing,
  };
  return r;
}

template <> const Rules &define<Prim::Cond>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // (pred bool[], operands...): each branch operands -> results
        if (c.e.bodies.size() != 2) return c.fail("needs two branches");
        if (c.numIns() == 0 || c.in(0).dtype != DType::Bool || c.in(0).rank() != 0)
          return c.fail("the predicate must be bool[]");
        std::vector<const Type *> operands = typesOf(c.e.ins, 1), results = typesOf(c.e.bodies[0]->results);
        for (const Func *branch : c.e.bodies)
          if (!c.paramsMatch(*branch, operands, named("branch", *branch)) ||
              !c.resultsMatch(*branch, results, named("branch", *branch)))
            return false;
        return outsAre(c, results);
      },
      .variance = VarianceRule::Cond,
      .jvp = [](JvpCtx &c) { c.L.condRule(c.e); },
      .transpose = [](TransposeCtx &c) { c.T.condRule(c.le); },
      .lower = [](FuncEmitter &fe, size_t i) { return fe.emitCond(fe.f.eqns[i]); },
      .scalar = nullptr,
      .sharding = condTies,
      .comm = communicatesNothing,
  };
  return r;
}

static bool transformReachedCodegen(FuncEmitter &fe, size_t) {
  return fe.fail("internal error: jvp/vjp reached codegen");
}

template <> const Rules &define<Prim::Jvp>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {  // (primals per f param, tangents like them) -> (f's results, their tangents)
        if (c.e.bodies.size() != 1) return c.fail("needs one function");
        const Func &f = *c.e.bodies[0];
        size_t n = f.params.size();
        if (c.numIns() != 2 * n) return c.fail("needs a primal and a tangent per param of @" + f.name);
        std::vector<const Type *> results = typesOf(f.results);
        if (!c.paramsMatch(f, typesOf(c.e.ins, 0, n), named("function", f)) ||
            !c.paramsMatch(f, typesOf(c.e.ins, n), named("function", f) + " (tangents)"))
          return false;
        return outsAre(c, results) && outsAre(c, results);
      },
      .variance = VarianceRule::Transform,
      .jvp = noTangent,  // replaced by the differentiate pass
      .transpose = notLinear,
      .lower = transformReachedCodegen,
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

template <> const Rules &define<Prim::Vjp>() {
  static const Rules r{
      .shape = [](ShapeCtx &c) {
        // (primals per f param, cotangents per f result) -> ((f's results if with_value), one
        // cotangent per wrt param, typed as the param)
        if (c.e.bodies.size() != 1) return c.fail("needs one function");
        const Func &f = *c.e.bodies[0];
        std::vector<int64_t> wrt;
        bool withValue, linear;
        if (!c.param("wrt", wrt) || !c.flag("with_value", withValue) || !c.flag("linear", linear)) return false;
        size_t n = f.params.size();
        if (c.numIns() != n + f.results.size())
          return c.fail("needs a primal per param and a cotangent per result of @" + f.name);
        std::vector<const Type *> results = typesOf(f.results);
        if (!c.paramsMatch(f, typesOf(c.e.ins, 0, n), named("function", f))) return false;
        for (size_t k = 0; k < results.size(); ++k)
          if (!c.in(n + k).sameShape(*results[k]))
            return c.fail("cotangent " + std::to_string(k) + " is " + typeText(c.in(n + k)) + ", result " +
                          std::to_string(k) + " of @" + f.name + " is " + typeText(*results[k]));
        if (withValue) outsAre(c, results);
        for (size_t i = 0; i < wrt.size(); ++i) {
          if (!c.inRange(wrt[i], (int64_t)n, "wrt param")) return false;
          if (std::count(wrt.begin(), wrt.begin() + i, wrt[i])) return c.fail("wrt lists a param twice");
          c.out(f.params[wrt[i]]->type);
        }
        return true;
      },
      .variance = VarianceRule::Transform,
      .jvp = noTangent,
      .transpose = notLinear,
      .lower = transformReachedCodegen,
      .scalar = nullptr,
      .sharding = unsupportedInJit,
      .comm = communicatesNothing,
  };
  return r;
}

} // namespace shmapc::prims
