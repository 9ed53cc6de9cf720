// Higher-order primitives. Every body (callee, shmap body, loop body, cond branch) is its own
// LLVM function with the common signature, so each call frees that body's temporaries when it
// returns: a loop body's buffers are released every iteration.
#include "codegen/CodegenContext.h"
#include "rules/Rules.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace shmapc::codegen {

namespace {

llvm::Constant *constGlobal(llvm::Module &mod, llvm::Constant *init, const char *name) {
  auto *g = new llvm::GlobalVariable(mod, init->getType(), true, llvm::GlobalValue::PrivateLinkage,
                                     init, name);
  g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return g;
}

} // namespace

bool FuncEmitter::emitCall(const ir::Eqn &e) {
  std::vector<llvm::Value *> ins, outs;
  for (const ir::Value *v : e.ins) ins.push_back(buffer(v));
  for (const ir::Value *v : e.outs) outs.push_back(buffer(v));
  b.CreateCall(me.funcType(), me.funcs.at(e.bodies[0]), {dev, ptrArray(outs), ptrArray(ins)});
  return true;
}

// shm_run_pipeline runs each device group's stage program on a thread of its own, all at once;
// group g writes its results, which follow those of the groups before it.
bool FuncEmitter::emitPipeline(const ir::Eqn &e) {
  std::vector<llvm::Value *> ins, outs;
  for (const ir::Value *v : e.ins) ins.push_back(buffer(v));
  for (const ir::Value *v : e.outs) outs.push_back(buffer(v));
  std::vector<llvm::Constant *> bodies;
  std::vector<int32_t> counts;
  for (const ir::Func *b : e.bodies) {
    bodies.push_back(me.funcs.at(b));
    counts.push_back((int32_t)b->results.size());
  }
  llvm::Constant *table = constGlobal(
      me.mod, llvm::ConstantArray::get(llvm::ArrayType::get(me.ptrTy, bodies.size()), bodies), "shm.stage_programs");
  std::vector<int64_t> outBytes;
  for (const ir::Value *v : e.outs) outBytes.push_back(me.groupOwner(v) ? 0 : v->type.byteSize());
  std::vector<int32_t> ends;
  for (int64_t g : e.intsParam("channel_ends")) ends.push_back((int32_t)g);
  std::vector<int32_t> deviceGroups;
  for (int64_t g : e.intsParam("device_groups")) deviceGroups.push_back((int32_t)g);
  std::vector<int64_t> inBytes;
  std::vector<int32_t> inGroups;  // (-1: every rank keeps it)
  for (const ir::Value *v : e.ins) {
    inBytes.push_back(v->type.byteSize());
    const ModuleEmitter::GroupOwner *owner = me.groupOwner(v);
    inGroups.push_back(owner ? owner->group : -1);
  }
  callRt("shm_run_pipeline", {i32((int64_t)bodies.size()), table, i32((int64_t)ins.size()), ptrArray(ins),
                              me.i64Array(inBytes), me.i32Array(inGroups),
                              me.i32Array(counts), ptrArray(outs), me.i64Array(outBytes), i32(e.intParam("channels")),
                              me.i32Array(ends), i32((int64_t)deviceGroups.size()), me.i32Array(deviceGroups),
                              me.cString(e.strParam("label")),
                              llvm::ConstantFP::get(llvm::Type::getDoubleTy(me.ctx), e.doublesParam("predicted_bubble")[0])});
  return true;
}

// shm_run_shmap splits the global inputs into per-device blocks, runs the body on every device
// and assembles the global outputs; the descriptors tell it the global shapes and specs.
// Which results of a shmap body are each the output of a collective whose rule accepts a
// collective-only output (Communication::collectiveOnlyOutput: psum, psum2, pmax, pmin,
// all_gather, all_gather_invariant) that nothing in the body reads and that is returned only
// once: its buffer is then written by that collective alone, which accepts a null one on
// devices whose block is not used (SHM_OUT_COLLECTIVE_ONLY in shmap_runtime.h).
static std::vector<bool> writtenOnlyByCollective(const ir::Func &body) {
  // (one walk over the body for all its results: a forward pass returns thousands of residuals)
  std::unordered_map<const ir::Value *, int> timesReturned;
  for (const ir::Value *v : body.results) ++timesReturned[v];
  std::unordered_set<const ir::Value *> read(body.params.begin(), body.params.end());
  std::unordered_map<const ir::Value *, bool> byCollective;  // (the first result of each eqn)
  for (const ir::Eqn &e : body.eqns) {
    read.insert(e.ins.begin(), e.ins.end());
    if (!e.outs.empty())
      byCollective[e.outs[0]] = rules::rulesOf(e.prim).comm.collectiveOnlyOutput;
  }
  std::vector<bool> out(body.results.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const ir::Value *v = body.results[i];
    auto c = byCollective.find(v);
    out[i] = timesReturned[v] == 1 && !read.count(v) && c != byCollective.end() && c->second;
  }
  return out;
}

// Whether every rank may keep only the blocks of output k that its own devices write
// (SHM_OUT_STAYS_SPLIT): nothing reads it, or only shmaps on this mesh with this spec, which
// read on each rank the blocks of the rank's devices. A rank has each of those when its own
// devices write it: the output is the same along the axes its spec leaves out (check_vma, so
// each rank writes its devices' blocks), or the spec names every axis (each device its own).
bool FuncEmitter::staysSplit(const ir::Eqn &e, size_t k) const {
  bool unread = false;
  const ShmapLayout *layout = me.splitLayout(e.outs[k], &unread);
  if (unread) return true;
  const ir::PartitionSpec &spec = e.specsParam("out_specs")[k];
  if (!layout || !(*layout == ShmapLayout{e.intParam("mesh"), spec})) return false;
  if (e.bodies[0]->checkVma) return true;
  const ir::Mesh &mesh = *me.irm.meshes[(size_t)e.intParam("mesh")];
  for (size_t a = 0; a < mesh.sizes.size(); ++a)
    if (mesh.sizes[a] > 1 && !(spec.axes() >> a & 1)) return false;
  return true;
}

bool FuncEmitter::emitShmap(const ir::Eqn &e) {
  int64_t meshIndex = e.intParam("mesh");
  if (meshIndex < 0 || meshIndex >= (int64_t)me.irm.meshes.size())
    return fail("shmap: mesh index out of range");
  const ir::Mesh &mesh = *me.irm.meshes[meshIndex];
  const std::vector<ir::PartitionSpec> &inSpecs = e.specsParam("in_specs");
  const std::vector<ir::PartitionSpec> &outSpecs = e.specsParam("out_specs");
  if (inSpecs.size() != e.ins.size() || outSpecs.size() != e.outs.size())
    return fail("shmap: one partition spec per operand and result expected");

  std::vector<llvm::Constant *> names;
  for (const std::string &a : mesh.axes) names.push_back(me.cString(a));
  llvm::Constant *axisNames =
      names.empty() ? llvm::ConstantPointerNull::get(llvm::PointerType::get(me.ctx, 0))
                    : constGlobal(me.mod,
                                  llvm::ConstantArray::get(
                                      llvm::ArrayType::get(me.ptrTy, names.size()), names),
                                  "shm.axis_names");

  // shm_array_desc {int32 rank; const int64 *shape; int32 dtype; const int32 *spec; int32 flags}
  llvm::StructType *descTy =
      llvm::StructType::get(me.ctx, {me.i32Ty, me.ptrTy, me.i32Ty, me.ptrTy, me.i32Ty});
  bool ok = true;
  const ir::Func &body = *e.bodies[0];
  const std::vector<bool> collectiveOnly = writtenOnlyByCollective(body);
  // An output whose buffer is an input's that the body does not itself compute over its block
  // of that input (a stage program's update of a parameter, ModuleEmitter::shmapUpdatesOver; a
  // loop carry's update where devices share its blocks, findDonatedCarries).
  auto donated = me.donatedResults.find(&body);
  auto overInput = [&](size_t k) {
    const ir::Value *at = root(e.outs[k]);
    if (at == e.outs[k]) return false;
    for (size_t j = 0; j < e.ins.size(); ++j) {
      const std::pair<size_t, size_t> byBody{k, j};
      if (root(e.ins[j]) == at && (donated == me.donatedResults.end() ||
                                   std::find(donated->second.begin(), donated->second.end(), byBody) ==
                                       donated->second.end()))
        return true;
    }
    return false;
  };
  auto descs = [&](const std::vector<ir::Value *> &vals, const std::vector<ir::PartitionSpec> &specs,
                   bool outputs) -> llvm::Value * {
    if (vals.empty()) return llvm::ConstantPointerNull::get(llvm::PointerType::get(me.ctx, 0));
    std::vector<llvm::Constant *> elems;
    for (size_t i = 0; i < vals.size(); ++i) {
      const ir::Type &t = vals[i]->type;
      if ((int64_t)specs[i].dims.size() > t.rank()) ok = false;
      int flags = outputs && collectiveOnly[i] ? 1 /* SHM_OUT_COLLECTIVE_ONLY */ : 0;
      if (outputs && body.checkVma) flags |= 2;  // SHM_OUT_SAME_ELSEWHERE (CheckOutSpecs proved it)
      if (outputs && staysSplit(e, i)) flags |= 4;  // SHM_OUT_STAYS_SPLIT
      if (outputs ? writesBlocks(e, i) : me.blocksLayout(vals[i]) != nullptr) flags |= 8;  // SHM_BLOCKS
      if (outputs && overInput(i)) flags |= 16;  // SHM_OUT_OVER_INPUT
      elems.push_back(llvm::ConstantStruct::get(
          descTy, {llvm::ConstantInt::get(me.i32Ty, t.rank()),
                   me.i64Array(t.shape), llvm::ConstantInt::get(me.i32Ty, (int)t.dtype),
                   me.i32Array(encodeSpec(specs[i], t.rank())), llvm::ConstantInt::get(me.i32Ty, flags)}));
    }
    return constGlobal(me.mod,
                       llvm::ConstantArray::get(llvm::ArrayType::get(descTy, elems.size()), elems),
                       "shm.descs");
  };
  llvm::Value *inDescs = descs(e.ins, inSpecs, false), *outDescs = descs(e.outs, outSpecs, true);
  if (!ok) return fail("shmap: a partition spec is longer than its array's rank");

  std::vector<llvm::Value *> ins, outs;
  for (const ir::Value *v : e.ins) ins.push_back(buffer(v));
  for (const ir::Value *v : e.outs) outs.push_back(buffer(v));
  callRt("shm_run_shmap",
         {i32((int64_t)mesh.axes.size()), me.i64Array(mesh.sizes), axisNames,
          me.funcs.at(e.bodies[0]), i32((int64_t)ins.size()), ptrArray(ins), inDescs,
          i32((int64_t)outs.size()), ptrArray(outs), outDescs});
  return true;
}

// Carries are double-buffered: iteration k reads one set and writes the other, so a body never
// writes a buffer it reads. The trip count is static, so the initial values go into whichever
// set makes the last iteration write the loop's own output buffers: no final copy.
bool FuncEmitter::emitLoop(const ir::Eqn &e) {
  int64_t lo = e.intParam("lo"), hi = e.intParam("hi");
  int64_t numConsts = e.intParam("num_consts");
  size_t numCarries = e.outs.size();
  if (numConsts < 0 || (size_t)numConsts + numCarries != e.ins.size())
    return fail("loop: operand count does not match num_consts + carries");
  int64_t trips = hi > lo ? hi - lo : 0;

  std::vector<llvm::Value *> finalSet, otherSet;
  for (const ir::Value *v : e.outs) finalSet.push_back(buffer(v));
  if (trips == 0) {
    for (size_t j = 0; j < numCarries; ++j) initCarry(finalSet[j], e.ins[numConsts + j], e.outs[j]);
    return true;
  }
  auto inPlace = me.carriesInPlace.find(e.bodies[0]);  // (one buffer for the old and new value)
  for (size_t j = 0; j < numCarries; ++j)
    otherSet.push_back(inPlace != me.carriesInPlace.end() && inPlace->second[j] ? finalSet[j] : scratchFor(e.outs[j]));
  const std::vector<llvm::Value *> &initSet = trips % 2 == 0 ? finalSet : otherSet;
  const std::vector<llvm::Value *> &nextSet = trips % 2 == 0 ? otherSet : finalSet;
  for (size_t j = 0; j < numCarries; ++j) initCarry(initSet[j], e.ins[numConsts + j], e.outs[j]);

  // ins = (i, consts..., carries...); even iterations read initSet, odd ones nextSet.
  llvm::Value *counter = entryAlloca(me.i32Ty, 1, "loop.i");
  auto insFor = [&](const std::vector<llvm::Value *> &carries) {
    std::vector<llvm::Value *> ins{counter};
    for (int64_t c = 0; c < numConsts; ++c) ins.push_back(buffer(e.ins[c]));
    ins.insert(ins.end(), carries.begin(), carries.end());
    return ptrArray(ins);
  };
  llvm::Value *insEven = insFor(initSet), *outsEven = ptrArray(nextSet);
  llvm::Value *insOdd = insFor(nextSet), *outsOdd = ptrArray(initSet);

  llvm::BasicBlock *pre = b.GetInsertBlock();
  llvm::BasicBlock *loop = llvm::BasicBlock::Create(me.ctx, "loop", fn);
  llvm::BasicBlock *exit = llvm::BasicBlock::Create(me.ctx, "loop.exit", fn);
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode *k = b.CreatePHI(me.i64Ty, 2, "k");
  k->addIncoming(i64(0), pre);
  b.CreateStore(b.CreateTrunc(b.CreateAdd(k, i64(lo)), me.i32Ty), counter);
  llvm::Value *odd = b.CreateTrunc(k, b.getInt1Ty());
  b.CreateCall(me.funcType(), me.funcs.at(e.bodies[0]),
               {dev, b.CreateSelect(odd, outsOdd, outsEven), b.CreateSelect(odd, insOdd, insEven)});
  llvm::Value *next = b.CreateAdd(k, i64(1), "k.next", true, true);
  k->addIncoming(next, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpNE(next, i64(trips)), loop, exit);
  b.SetInsertPoint(exit);
  return true;
}

// A loop carry updated in place: the body writes its new value over the old one, which dies
// in the same fused loop (`w = w - lr * g`), or writes a slice of it (a dynamic_update_slice
// of the carry read last there: a scan's stacked outputs, the gradient of stacked layers), so
// the loop keeps one buffer for the carry where it would alternate between two (half the
// memory of a training loop's parameters and optimizer state; no copy of a whole stack per
// step). Per carry j (param consts + j, result j): the result is computed by a fused loop that
// may overwrite the param (overwritable) or such an update, the param is not itself a result,
// and the result is returned once.
std::vector<bool> FuncEmitter::carriesInPlace(const ir::Func &body, const ModuleEmitter::FuncFacts &facts) {
  const size_t numCarries = body.results.size(), numConsts = body.params.size() - numCarries;
  std::vector<bool> inPlace(numCarries, false);
  const auto &[lastRead, definedBy, timesReturned, groups, groupOf, renamed] = facts;
  for (size_t j = 0; j < numCarries; ++j) {
    const ir::Value *r = body.results[j], *p = body.params[numConsts + j];
    auto def = definedBy.find(r);
    auto returned = timesReturned.find(r);
    if (def == definedBy.end() || returned == timesReturned.end() || returned->second != 1 ||
        timesReturned.count(p) || r->type.numElements() <= 1)
      continue;
    const ir::Eqn &e = body.eqns[def->second];
    if (e.prim == ir::Prim::DynamicUpdateSlice) {  // a slice written into the carry read last there
      auto lr = lastRead.find(p);
      inPlace[j] = e.ins[0] == p && lr != lastRead.end() && lr->second == def->second && !renamed.count(p) &&
                   std::count(e.ins.begin() + 1, e.ins.end(), p) == 0;
      continue;
    }
    if (groupOf[def->second] < 0) continue;
    const auto &[first, last] = groups[(size_t)groupOf[def->second]];
    inPlace[j] = overwritable(body, first, last, def->second, p, lastRead, renamed);
  }
  return inPlace;
}

// Carries are double-buffered as in emitLoop, but the trip count is known only at run time:
// set A is the loop's own output buffers, set B scratch; the parity of the iteration count says
// which holds the final carries, and one copy moves them into A when it is B.
bool FuncEmitter::emitWhile(const ir::Eqn &e) {
  if (e.bodies.size() != 2) return fail("while: expected a predicate and a body");
  int64_t numConsts = e.intParam("num_consts");
  size_t numCarries = e.outs.size();
  if (numConsts < 0 || (size_t)numConsts + numCarries != e.ins.size())
    return fail("while: operand count does not match num_consts + carries");

  // Two sets of carry buffers, A and B: an iteration reads one and writes the other, except
  // for the carries its body updates in place (one buffer).
  auto inPlace = me.carriesInPlace.find(e.bodies[1]);
  auto isInPlace = [&](size_t j) { return inPlace != me.carriesInPlace.end() && inPlace->second[j]; };
  std::vector<llvm::Value *> setA, setB, consts;
  for (size_t j = 0; j < numCarries; ++j) {
    setA.push_back(buffer(e.outs[j]));
    setB.push_back(isInPlace(j) ? setA[j] : scratchFor(e.outs[j]));
  }
  for (int64_t c = 0; c < numConsts; ++c) consts.push_back(buffer(e.ins[c]));
  for (size_t j = 0; j < numCarries; ++j) initCarry(setA[j], e.ins[numConsts + j], e.outs[j]);
  auto insFor = [&](const std::vector<llvm::Value *> &carries) {
    std::vector<llvm::Value *> ins = consts;
    ins.insert(ins.end(), carries.begin(), carries.end());
    return ptrArray(ins);
  };
  llvm::Value *insA = insFor(setA), *insB = insFor(setB);
  llvm::Value *outsA = ptrArray(setA), *outsB = ptrArray(setB);
  llvm::Value *pred = entryAlloca(me.i8Ty, 1, "while.pred");
  llvm::Value *predOuts = ptrArray({pred});

  llvm::BasicBlock *pre = b.GetInsertBlock();
  llvm::BasicBlock *header = llvm::BasicBlock::Create(me.ctx, "while.cond", fn);
  llvm::BasicBlock *bodyBB = llvm::BasicBlock::Create(me.ctx, "while.body", fn);
  llvm::BasicBlock *exit = llvm::BasicBlock::Create(me.ctx, "while.exit", fn);
  llvm::BasicBlock *copyBack = llvm::BasicBlock::Create(me.ctx, "while.copy", fn);
  llvm::BasicBlock *done = llvm::BasicBlock::Create(me.ctx, "while.end", fn);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode *inB = b.CreatePHI(b.getInt1Ty(), 2, "in_b");  // the current carries are set B
  inB->addIncoming(b.getFalse(), pre);
  llvm::Value *ins = b.CreateSelect(inB, insB, insA);
  b.CreateCall(me.funcType(), me.funcs.at(e.bodies[0]), {dev, predOuts, ins});
  llvm::Value *go = b.CreateICmpNE(b.CreateLoad(me.i8Ty, pred), b.getInt8(0));
  b.CreateCondBr(go, bodyBB, exit);
  b.SetInsertPoint(bodyBB);
  b.CreateCall(me.funcType(), me.funcs.at(e.bodies[1]),
               {dev, b.CreateSelect(inB, outsA, outsB), ins});
  inB->addIncoming(b.CreateNot(inB), bodyBB);
  b.CreateBr(header);
  b.SetInsertPoint(exit);
  b.CreateCondBr(inB, copyBack, done);
  b.SetInsertPoint(copyBack);
  for (size_t j = 0; j < numCarries; ++j)
    if (!isInPlace(j)) copyValue(setA[j], setB[j], e.outs[j]);
  b.CreateBr(done);
  b.SetInsertPoint(done);
  return true;
}

bool FuncEmitter::emitCond(const ir::Eqn &e) {
  if (e.bodies.size() != 2) return fail("cond: expected two branches");
  std::vector<llvm::Value *> ins, outs;
  for (size_t i = 1; i < e.ins.size(); ++i) ins.push_back(buffer(e.ins[i]));
  for (const ir::Value *v : e.outs) outs.push_back(buffer(v));
  llvm::Value *insArr = ptrArray(ins), *outsArr = ptrArray(outs);
  llvm::Value *pred = b.CreateICmpNE(b.CreateLoad(me.i8Ty, buffer(e.ins[0])), b.getInt8(0));

  // A predicate that may differ between devices (device-varying, or untyped with check_vma
  // off) would let some devices skip a collective the others wait in: every device runs both
  // branches and keeps the result of its own, so every device performs every collective.
  if (rules::condRunsBothBranches(f, e)) {
    std::vector<llvm::Value *> other;
    for (const ir::Value *v : e.outs) other.push_back(scratchFor(v));
    b.CreateCall(me.funcType(), me.funcs.at(e.bodies[0]), {dev, outsArr, insArr});
    b.CreateCall(me.funcType(), me.funcs.at(e.bodies[1]), {dev, ptrArray(other), insArr});
    llvm::BasicBlock *takeFalse = llvm::BasicBlock::Create(me.ctx, "cond.take_false", fn);
    llvm::BasicBlock *join = llvm::BasicBlock::Create(me.ctx, "cond.end", fn);
    b.CreateCondBr(pred, join, takeFalse);
    b.SetInsertPoint(takeFalse);
    for (size_t k = 0; k < e.outs.size(); ++k) copyValue(outs[k], other[k], e.outs[k]);
    b.CreateBr(join);
    b.SetInsertPoint(join);
    return true;
  }

  llvm::BasicBlock *thenBB = llvm::BasicBlock::Create(me.ctx, "cond.true", fn);
  llvm::BasicBlock *elseBB = llvm::BasicBlock::Create(me.ctx, "cond.false", fn);
  llvm::BasicBlock *join = llvm::BasicBlock::Create(me.ctx, "cond.end", fn);
  b.CreateCondBr(pred, thenBB, elseBB);
  for (int branch = 0; branch < 2; ++branch) {
    b.SetInsertPoint(branch == 0 ? thenBB : elseBB);
    b.CreateCall(me.funcType(), me.funcs.at(e.bodies[branch]), {dev, outsArr, insArr});
    b.CreateBr(join);
  }
  b.SetInsertPoint(join);
  return true;
}

} // namespace shmapc::codegen
