// Structural checks on IR, run after every pass under --verify-each (and in debug builds).
// A failure here is a compiler bug, so messages name the function and equation, not the user.
// What each primitive requires of its operands, params and results (dtypes, shapes, bodies'
// signatures) is its shape rule, at its definition in compiler/prims/; the caller passes the
// rules in as `shapeCheck` (prims::verifyModule), since ir is below prims.
#include "ir/IR.h"

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
