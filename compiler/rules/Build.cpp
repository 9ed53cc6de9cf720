// Building an equation with its result typed by the rules (Rules.h, makeEqn): the one place a
// pass, autodiff or the partitioner gets a result type from, instead of computing it again.
#include "rules/ShapeRules.h"
#include "rules/Rules.h"

namespace shmapc::rules {

using namespace ir;

bool resultVariance(const Eqn &e, AxisSet &vary, std::string &why) {
  const AxisSet axes = e.axesParamSet();
  const AxisSet in = e.ins.empty() ? 0 : e.ins[0]->type.vary;
  switch (rulesOf(e.prim).variance) {
  case VarianceRule::Invariant: vary = 0; return true;
  case VarianceRule::SameAsOperands:
    for (const Value *v : e.ins)
      if (v->type.vary != in) {
        why = "its operands vary over different axes: lift them to one variance first";
        return false;
      }
    vary = in;
    return true;
  case VarianceRule::UserPsum:
  case VarianceRule::VaryingToInvariant:
  case VarianceRule::MaxMin:
  case VarianceRule::InvariantCast: vary = in & ~axes; return true;
  case VarianceRule::InvariantToVarying: vary = in | axes; return true;
  case VarianceRule::VaryingToVarying: vary = in; return true;
  case VarianceRule::AxisIndex: vary = axes; return true;
  case VarianceRule::Sharded:
  case VarianceRule::FromRoot:
  case VarianceRule::Loop:
  case VarianceRule::While:
  case VarianceRule::Cond:
  case VarianceRule::Shmap:
  case VarianceRule::Call:
  case VarianceRule::Transform:
  case VarianceRule::Effect: break;
  }
  why = "its variance rule depends on more than its operands: give the result's type";
  return false;
}

bool tryMakeEqn(Func &f, Prim p, std::vector<Value *> ins, std::map<std::string, Attr> params, Loc loc,
                const MakeEqn &how, Eqn &made, Refusal &refused) {
  Eqn e{p, std::move(ins), {}, std::move(params), {}, loc};
  auto refuse = [&](const std::string &why) {
    refused = Refusal{why, std::nullopt, -1, nullptr, ""};
    return false;
  };
  // (a rule that reads the declared result type finds it on a stand-in)
  Value declared{-1, how.declared ? *how.declared : Type{}, ""};
  if (how.declared) e.outs.push_back(&declared);
  ShapeCtx c{e, f};
  if (std::string why = arityProblem(p, e.ins.size(), std::nullopt); !why.empty()) return refuse(why);
  const bool ok = rulesOf(p).shape(c);
  if (c.missingDeclared) return refuse("its result's type comes from the equation: give it (declared)");
  if (!ok) {
    refused = Refusal{c.why.empty() ? "refused by its shape rule" : c.why, c.diag, c.badOperand, c.badParam, c.hint};
    return false;
  }
  if (c.outs.size() != 1) return refuse("makes " + std::to_string(c.outs.size()) + " results, not one");
  Type t = c.outs[0];
  std::string why;
  if (how.untyped) {
    t.vary = how.declared ? how.declared->vary : 0;
  } else if (!resultVariance(e, t.vary, why)) {
    if (!how.declared) return refuse(why);
    t.vary = how.declared->vary;
  }
  if (how.declared && *how.declared != t)
    return refuse("its result is declared " + typeToString(*how.declared, f.mesh) + ", but the rules give " +
                  typeToString(t, f.mesh));
  if (how.into && how.into->type != t)
    return refuse("its result is " + typeToString(t, f.mesh) + ", but the value given for it is " +
                  typeToString(how.into->type, f.mesh));
  e.outs.assign(1, how.into ? how.into : f.newValue(t, how.hint));
  made = std::move(e);
  return true;
}

Eqn makeEqn(Func &f, Prim p, std::vector<Value *> ins, std::map<std::string, Attr> params, Loc loc,
            const MakeEqn &how) {
  Eqn made;
  Refusal refused;
  if (!tryMakeEqn(f, p, std::move(ins), std::move(params), loc, how, made, refused))
    throw InternalError("built an ill-typed " + std::string(primName(p)) + " in @" + f.name + ": " + refused.why);
  return made;
}

} // namespace shmapc::rules
