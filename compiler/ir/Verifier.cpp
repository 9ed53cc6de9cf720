// Structural checks on IR, run after every pass under --verify-each (and in debug builds).
// A failure here is a compiler bug, so messages name the function and equation, not the user.
// What each primitive requires of its operands, params and results (dtypes, shapes, bodies'
// signatures) is its shape rule, at its definition in compiler/prims/; the caller passes the
// rules in as `shapeCheck` (rules::verifyModule), since ir is below the rules layer.
#include "ir/IR.h"

#include <map>
#include <set>
#include <sstream>

namespace shmapc::ir {

namespace {

class Verifier {
public:
  std::vector<std::string> problems;
  EqnCheck shapeCheck = nullptr;

  void func(const Func &f) {
    std::set<const Value *> defined(f.params.begin(), f.params.end());
    definer_.clear();
    for (size_t i = 0; i < f.eqns.size(); ++i) {
      eqn(f, f.eqns[i], i, defined);
      if (f.eqns[i].prim == Prim::InvariantCast) invariantCast(f, f.eqns[i], i);
      for (const Value *v : f.eqns[i].outs) definer_[v] = &f.eqns[i];
    }
    for (const Value *r : f.results)
      if (!defined.count(r)) fail(f, "result is not defined in the function");
  }

private:
  void fail(const Func &f, const std::string &msg) { problems.push_back("@" + f.name + ": " + msg); }
  void fail(const Func &f, size_t i, const Eqn &e, const std::string &msg) {
    std::ostringstream s;
    s << "@" << f.name << " eqn " << i << " (" << primName(e.prim) << "): " << msg;
    problems.push_back(s.str());
  }

  // invariant_cast retypes its operand invariant over `axes` with no communication, which is
  // sound only where the values are equal along them. combine-reductions makes one for each
  // piece of a joined psum2 whose operand was lifted over those axes by a pbroadcast: the
  // piece is a psum, over other axes, of a value invariant over them, so every device along
  // them holds the same sum. Any other operand (and the user cannot write the cast) is refused:
  //   piece = slice(psum2(concatenate(..., pbroadcast(p), ...))), p invariant over `axes`,
  //   the slice exactly the range pbroadcast(p) fills (flat, unit strides).
  void invariantCast(const Func &f, const Eqn &e, size_t i) {
    if (e.ins.size() != 1 || e.outs.size() != 1 || !e.ins[0] || !e.outs[0] || !e.has("axes")) return;
    const AxisSet axes = e.axesParamSet();
    const Type &in = e.ins[0]->type, &out = e.outs[0]->type;
    if (!axes || (axes & ~in.vary) || out.vary != (in.vary & ~axes))
      return fail(f, i, e, "the result must vary over the operand's axes but `axes` (and the operand over all of them)");
    auto def = [&](const Value *v, Prim p) -> const Eqn * {
      auto it = definer_.find(v);
      return it != definer_.end() && it->second->prim == p && it->second->ins.size() >= 1 ? it->second : nullptr;
    };
    const Eqn *slice = def(e.ins[0], Prim::Slice);
    const Eqn *sum = slice ? def(slice->ins[0], Prim::Psum2) : nullptr;
    const Eqn *joined = sum ? def(sum->ins[0], Prim::Concatenate) : nullptr;
    const char *shape = "its operand must be a piece of a psum2 of a concatenate (combine-reductions' form)";
    if (!joined || joined->ins[0]->type.rank() != 1 || !slice->has("start") || !slice->has("limit") ||
        slice->intsParam("start").size() != 1 || slice->intsParam("limit").size() != 1 ||
        (slice->has("strides") && slice->intsParam("strides") != std::vector<int64_t>{1}))
      return fail(f, i, e, shape);
    if (sum->axesParamSet() & axes) return fail(f, i, e, "the psum2 it takes a piece of sums over its axes");
    const int64_t start = slice->intsParam("start")[0], limit = slice->intsParam("limit")[0];
    int64_t at = 0;
    for (const Value *piece : joined->ins) {
      const int64_t n = piece->type.numElements();
      if (at == start && at + n == limit) {
        const Eqn *lift = def(piece, Prim::Pbroadcast);
        if (!lift || (lift->ins[0]->type.vary & axes) || (lift->axesParamSet() & axes) != axes)
          return fail(f, i, e, "the piece of the psum2's operand it takes must be a pbroadcast over its axes "
                               "of a value invariant over them");
        return;
      }
      at += n;
    }
    fail(f, i, e, shape);
  }

  void eqn(const Func &f, const Eqn &e, size_t i, std::set<const Value *> &defined) {
    const size_t before = problems.size();
    const PrimInfo &info = primInfo(e.prim);
    for (const Value *v : e.ins)
      if (!v || !defined.count(v)) fail(f, i, e, "operand used before it is defined");
    if (info.numIn >= 0 && (int)e.ins.size() != info.numIn)
      fail(f, i, e, "expects " + std::to_string(info.numIn) + " operands");
    if (info.numOut >= 0 && (int)e.outs.size() != info.numOut)
      fail(f, i, e, "expects " + std::to_string(info.numOut) + " results");
    for (const Value *v : e.outs) {
      if (!v) { fail(f, i, e, "null result"); continue; }
      if (!defined.insert(v).second) fail(f, i, e, "result defined twice");
      for (int64_t d : v->type.shape)
        if (d < 0) fail(f, i, e, "negative dimension");
    }
    if (info.kind == PrimKind::Collective && !f.mesh)
      fail(f, i, e, "collective in a function without a mesh");
    if (!shapeCheck || problems.size() != before) return;
    std::string why = shapeCheck(e, f);
    if (!why.empty()) fail(f, i, e, why);
  }

  std::map<const Value *, const Eqn *> definer_;  // of the function being checked
};

} // namespace

std::vector<std::string> verifyModule(const Module &m, EqnCheck shapeCheck) {
  Verifier v;
  v.shapeCheck = shapeCheck;
  if (!m.main) v.problems.push_back("module has no main");
  for (const auto &f : m.funcs) v.func(*f);
  return v.problems;
}

} // namespace shmapc::ir
