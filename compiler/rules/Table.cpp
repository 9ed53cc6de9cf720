// The table rulesOf() reads, which the primitives' definitions install (compiler/prims/,
// installRules there), and the factor rules several primitives share.
#include "rules/Rules.h"

#include <cstdio>
#include <cstdlib>

namespace shmapc::rules {

using namespace ir;

namespace {
const RulesTable *installed = nullptr;
}

void installRules(const RulesTable &table) { installed = &table; }

const Rules &rulesOf(Prim p) {
  if (!installed) {
    // (a program that links the rules layer without the definitions above it, or forgot to
    // install them: a build error in effect, reported before anything reads a null rule)
    std::fputs("shmapc: internal error: no primitive rules installed (prims::installRules)\n", stderr);
    std::abort();
  }
  return *(*installed)[(size_t)p];
}

// Every dimension of the operands and the result is one factor (operands of one shape).
FactorRule elementwiseFactors(const Eqn &e) {
  FactorRule r;
  const int64_t rank = e.outs[0]->type.rank();
  for (int64_t d = 0; d < rank; ++d) {
    Factor f;
    for (size_t i = 0; i < e.ins.size(); ++i)
      if (e.ins[i]->type.rank() == rank) f.ins.push_back({(int)i, (int)d});
    f.outs.push_back({0, (int)d});
    r.factors.push_back(f);
  }
  return r;
}

Value *tiedValue(const Eqn &e, const Tied &t) {
  switch (t.of) {
  case Tied::In: return e.ins[(size_t)t.index];
  case Tied::Out: return e.outs[(size_t)t.index];
  case Tied::Param: return e.bodies[(size_t)t.body]->params[(size_t)t.index];
  case Tied::Result: return e.bodies[(size_t)t.body]->results[(size_t)t.index];
  }
  return nullptr;
}

FactorRule replicatedFactors(const Eqn &) { return FactorRule{FactorRule::Replicated, {}, {}, nullptr}; }
FactorRule unsupportedInJit(const Eqn &) { return FactorRule{FactorRule::Unsupported, {}, {}, nullptr}; }

} // namespace shmapc::rules
