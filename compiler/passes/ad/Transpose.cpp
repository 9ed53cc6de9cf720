// The transposer: consumes the tape backwards, applying each linear primitive's transpose
// rule (compiler/prims/) to the cotangent of its result. Collectives follow the table of
// JAX's note on efficient transposition
// (psum2 <-> pbroadcast, all_gather <-> psum_scatter, all_gather_invariant <-> pscatter,
// all_to_all <-> all_to_all, ppermute <-> inverse ppermute).
#include "passes/ad/AD.h"
#include "rules/Rules.h"

namespace shmapc::passes::ad {

void Transposer::accumulate(Value *tv, Value *c) {
  if (!tv || !c) return;
  auto it = ct.find(tv);
  if (it == ct.end()) {
    ct[tv] = c;
    return;
  }
  it->second = b.binary(Prim::Add, it->second, c);
}

void Transposer::rule(const LinearEqn &le) {
  const Eqn &e = le.e;
  b.loc = e.loc;
  Value *c = nullptr;
  if (primInfo(e.prim).kind != PrimKind::HigherOrder) {
    c = ctOf(e.outs[0]);
    if (!c) return;  // a zero cotangent contributes nothing
  }
  static const Type none{};
  TransposeCtx ctx{*this, b, le, e, c, e.ins.empty() ? none : e.ins[0]->type};
  rules::rulesOf(e.prim).transpose(ctx);
}

} // namespace shmapc::passes::ad
