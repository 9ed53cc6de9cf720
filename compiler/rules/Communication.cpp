// The rules layer's questions about communication, answered from each primitive's `comm` rule.
#include "rules/Rules.h"
#include "rules/ShapeRules.h"

namespace shmapc::rules {

const char *collectiveKindName(CollectiveKind k) {
  switch (k) {
#define SHM_COLLECTIVE(Id, Name)                                                                                     \
  case CollectiveKind::Id: return Name;
#include "shm_collectives.def"
#undef SHM_COLLECTIVE
  }
  return "?";
}

CollectiveBytes everyDeviceReceives(int64_t bytes, int64_t devices) {
  CollectiveBytes c;
  c.receivedMin = c.receivedMax = bytes;
  c.received = devices * bytes;
  return c;
}

bool communicatesOver(const ir::Eqn &e, ir::AxisSet axes) {
  if (rulesOf(e.prim).comm.what == Communication::Collective && (!e.has("axes") || (e.axesParamSet() & axes)))
    return true;
  for (const ir::Func *body : e.bodies)
    if (communicatesOver(*body, axes)) return true;
  return false;
}

bool communicatesOver(const ir::Func &f, ir::AxisSet axes) {
  for (const ir::Eqn &e : f.eqns)
    if (communicatesOver(e, axes)) return true;
  return false;
}

bool condRunsBothBranches(const ir::Func &owner, const ir::Eqn &cond) {
  if (cond.prim != ir::Prim::Cond || cond.bodies.size() != 2 || cond.ins.empty()) return false;
  bool mayDiverge = cond.ins[0]->type.vary != 0 || (owner.mesh && !owner.checkVma);
  return mayDiverge && (communicatesOver(*cond.bodies[0]) || communicatesOver(*cond.bodies[1]));
}

} // namespace shmapc::rules
