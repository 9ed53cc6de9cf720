// Structural checks on IR, run after every pass under --verify-each (and in debug builds).
// A failure here is a compiler bug, so messages name the function and equation, not the user.
#include "ir/IR.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace shmapc::ir {

namespace {

class Verifier {
public:
  std::vector<std::string> problems;

  void func(const Func &f) {
    std::set<const Value *> defined(f.params.begin(), f.params.end());
    for (size_t i = 0; i < f.eqns.size(); ++i) eqn(f, f.eqns[i], i, defined);
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

  void eqn(const Func &f, const Eqn &e, size_t i, std::set<const Value *> &defined) {
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
    switch (info.kind) {
    case PrimKind::Unary:
    case PrimKind::Binary:
    case PrimKind::Compare: elementwise(f, e, i); break;
    case PrimKind::HigherOrder: higherOrder(f, e, i); break;
    default: break;
    }
    if (e.prim == Prim::Load || e.prim == Prim::Save || e.prim == Prim::SaveNpz) files(f, e, i);
    if (e.prim == Prim::Select && e.ins.size() == 3 && e.outs.size() == 1) {
      if (e.ins[0]->type.dtype != DType::Bool) fail(f, i, e, "predicate is not bool");
      for (const Value *v : e.ins)
        if (v->type.shape != e.outs[0]->type.shape) fail(f, i, e, "operand shapes differ");
    }
  }

  // load, save, savez: a path; savez one key per operand; a load's spec only under a mesh,
  // naming the mesh's axes, at most once each, and no longer than the rank.
  void files(const Func &f, const Eqn &e, size_t i) {
    if (e.has("path") == e.has("path_arg")) fail(f, i, e, "needs exactly one of path and path_arg");
    if (e.prim == Prim::SaveNpz) {
      size_t keys = 0;
      if (e.has("keys") && std::holds_alternative<std::string>(e.params.at("keys"))) {
        const std::string &k = e.strParam("keys");
        keys = k.empty() ? 0 : 1 + (size_t)std::count(k.begin(), k.end(), ',');
      }
      if (keys != e.ins.size()) fail(f, i, e, "needs one key per operand");
    }
    if ((e.prim == Prim::Save || e.prim == Prim::SaveNpz) && f.mesh) fail(f, i, e, "file output inside a shmap body");
    if (e.prim != Prim::Load || e.outs.size() != 1) return;
    if (!e.has("spec")) {
      if (f.mesh) fail(f, i, e, "a load without a spec inside a shmap body");
      return;
    }
    if (!f.mesh) return fail(f, i, e, "a sharded load (spec) outside a shmap body");
    if (!std::holds_alternative<std::vector<PartitionSpec>>(e.params.at("spec")) || e.specsParam("spec").size() != 1)
      return fail(f, i, e, "spec must hold one partition spec");
    const PartitionSpec &spec = e.specsParam("spec")[0];
    if ((int64_t)spec.dims.size() > e.outs[0]->type.rank()) fail(f, i, e, "spec is longer than the rank");
    std::set<int> seen;
    for (const auto &axes : spec.dims)
      for (int a : axes)
        if (a < 0 || a >= (int)f.mesh->axes.size() || !seen.insert(a).second)
          fail(f, i, e, "spec names a mesh axis that does not exist, or one twice");
  }

  void elementwise(const Func &f, const Eqn &e, size_t i) {
    if (e.outs.size() != 1) return;
    const Type &out = e.outs[0]->type;
    for (const Value *v : e.ins) {
      if (v->type.shape != out.shape) fail(f, i, e, "operand shape differs from the result's");
      if (e.prim != Prim::Convert && primInfo(e.prim).kind != PrimKind::Compare &&
          v->type.dtype != out.dtype)
        fail(f, i, e, "operand dtype differs from the result's");
    }
  }

  void signature(const Func &f, const Eqn &e, size_t i, const Func &body,
                 const std::vector<const Value *> &ins, const std::vector<const Value *> &outs,
                 bool compareShapesOnly) {
    if (body.params.size() != ins.size() || body.results.size() != outs.size()) {
      fail(f, i, e, "body @" + body.name + " has the wrong number of params or results");
      return;
    }
    auto same = [&](const Type &a, const Type &b) {
      return compareShapesOnly ? a.dtype == b.dtype : a.sameShape(b);
    };
    for (size_t k = 0; k < ins.size(); ++k)
      if (!same(body.params[k]->type, ins[k]->type))
        fail(f, i, e, "operand " + std::to_string(k) + " does not match @" + body.name);
    for (size_t k = 0; k < outs.size(); ++k)
      if (!same(body.results[k]->type, outs[k]->type))
        fail(f, i, e, "result " + std::to_string(k) + " does not match @" + body.name);
  }

  void higherOrder(const Func &f, const Eqn &e, size_t i) {
    std::vector<const Value *> ins(e.ins.begin(), e.ins.end()), outs(e.outs.begin(), e.outs.end());
    switch (e.prim) {
    case Prim::Call:
      if (e.bodies.size() != 1) return fail(f, i, e, "needs one callee");
      signature(f, e, i, *e.bodies[0], ins, outs, false);
      break;
    case Prim::Shmap:
      if (e.bodies.size() != 1 || !e.bodies[0]->mesh) return fail(f, i, e, "needs a body with a mesh");
      if (f.mesh) fail(f, i, e, "shmap inside a function with a mesh");
      // Block shapes differ from global shapes by the specs; check dtypes and counts only.
      signature(f, e, i, *e.bodies[0], ins, outs, true);
      break;
    case Prim::Loop: {
      if (e.bodies.size() != 1) return fail(f, i, e, "needs one body");
      const Func &b = *e.bodies[0];
      size_t consts = (size_t)e.intParam("num_consts");
      if (b.params.empty() || b.params[0]->type.dtype != DType::I32 || !b.params[0]->type.shape.empty())
        return fail(f, i, e, "body's first param must be the i32[] index");
      if (consts > ins.size()) return fail(f, i, e, "num_consts exceeds operands");
      std::vector<const Value *> bodyIns;
      bodyIns.push_back(b.params[0]);  // the index matches itself
      bodyIns.insert(bodyIns.end(), ins.begin(), ins.end());
      signature(f, e, i, b, bodyIns, outs, false);
      if (ins.size() - consts != outs.size()) fail(f, i, e, "carries and results differ in number");
      break;
    }
    case Prim::While: {
      if (e.bodies.size() != 2) return fail(f, i, e, "needs a predicate and a body");
      size_t consts = (size_t)e.intParam("num_consts");
      if (consts > ins.size()) return fail(f, i, e, "num_consts exceeds operands");
      if (ins.size() - consts != outs.size()) fail(f, i, e, "carries and results differ in number");
      const Func &pred = *e.bodies[0];
      if (pred.results.size() != 1 || pred.results[0]->type.dtype != DType::Bool ||
          !pred.results[0]->type.shape.empty())
        return fail(f, i, e, "predicate must return one bool[]");
      std::vector<const Value *> predOut{pred.results[0]};
      signature(f, e, i, pred, ins, predOut, false);
      signature(f, e, i, *e.bodies[1], ins, outs, false);
      break;
    }
    case Prim::Cond: {
      if (e.bodies.size() != 2) return fail(f, i, e, "needs two branches");
      if (ins.empty() || ins[0]->type.dtype != DType::Bool || !ins[0]->type.shape.empty())
        return fail(f, i, e, "predicate must be bool[]");
      std::vector<const Value *> operands(ins.begin() + 1, ins.end());
      signature(f, e, i, *e.bodies[0], operands, outs, false);
      signature(f, e, i, *e.bodies[1], operands, outs, false);
      break;
    }
    default: break;
    }
  }
};

} // namespace

std::vector<std::string> verifyModule(const Module &m) {
  Verifier v;
  if (!m.main) v.problems.push_back("module has no main");
  for (const auto &f : m.funcs) v.func(*f);
  return v.problems;
}

} // namespace shmapc::ir
