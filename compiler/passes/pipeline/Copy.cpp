// Copies of equations into another function, their bodies copied too.
#include "passes/pipeline/Copy.h"

namespace shmapc::passes::pipeline {

namespace {
Func *copyBody(Module &m, const Func &src, std::map<const Func *, Func *> &copies);
} // namespace

void copyEqnInto(Module &m, const Eqn &e, Func &into, std::map<const Value *, Value *> &vm,
                 std::map<const Func *, Func *> &copies, std::vector<Eqn> &out) {
  Eqn c = e;
  for (Value *&v : c.ins) {
    auto it = vm.find(v);
    if (it != vm.end()) v = it->second;
  }
  for (Value *&o : c.outs) {
    Value *no = into.newValue(o->type, o->hint);
    vm[o] = no;
    o = no;
  }
  for (Func *&b : c.bodies) b = copyBody(m, *b, copies);
  out.push_back(std::move(c));
}

namespace {

void setMesh(Func &f, const Mesh *mesh) {
  f.mesh = mesh;
  for (Eqn &e : f.eqns)
    for (Func *b : e.bodies)
      if (b->isNested) setMesh(*b, mesh);
}

Func *copyBody(Module &m, const Func &src, std::map<const Func *, Func *> &copies) {
  auto it = copies.find(&src);
  if (it != copies.end()) return it->second;
  Func *f = m.newFunc(src.name);
  copies[&src] = f;
  f->loc = src.loc;
  f->mesh = src.mesh;
  f->isShmapBody = src.isShmapBody;
  f->checkVma = src.checkVma;
  f->autoPbroadcast = src.autoPbroadcast;
  f->isNested = src.isNested;
  f->singleUse = src.singleUse;
  f->isBackward = src.isBackward;
  f->returnLoc = src.returnLoc;
  f->outSpecLocs = src.outSpecLocs;
  f->forwardPart = src.forwardPart ? copyBody(m, *src.forwardPart, copies) : nullptr;
  std::map<const Value *, Value *> vm;
  for (const Value *p : src.params) {
    f->params.push_back(f->newValue(p->type, p->hint));
    vm[p] = f->params.back();
  }
  std::vector<Eqn> eqns;
  for (const Eqn &e : src.eqns) copyEqnInto(m, e, *f, vm, copies, eqns);
  f->eqns = std::move(eqns);
  for (const Value *r : src.results) f->results.push_back(vm.count(r) ? vm.at(r) : const_cast<Value *>(r));
  return f;
}

} // namespace

Func *copyFunc(Module &m, const Func &src, const Mesh *mesh) {
  std::map<const Func *, Func *> copies;
  Func *f = copyBody(m, src, copies);
  f->isTrace = src.isTrace;
  setMesh(*f, mesh);
  return f;
}

} // namespace shmapc::passes::pipeline
