// Host values in the blocks form (ModuleEmitter::blocksLayout, SHM_BLOCKS): a value only
// shmaps read, in one layout, is kept as the rank's blocks of it, so that under MPI a rank's
// parameters and optimizer state are 1/N of the model. Its size is known only at run time
// (the devices a rank runs are), so it has its own allocation (StorageKind::Blocks) and its
// copies and scratch buffers ask the runtime for its bytes.
#include "codegen/CodegenContext.h"

#include <llvm/IR/Constants.h>

#include <algorithm>

namespace shmapc::codegen {

std::vector<int32_t> encodeSpec(const ir::PartitionSpec &spec, int64_t rank) {
  std::vector<int32_t> out;
  for (int64_t d = 0; d < rank; ++d) {
    const std::vector<int> none;
    const std::vector<int> &axes = d < (int64_t)spec.dims.size() ? spec.dims[d] : none;
    out.push_back((int32_t)axes.size());
    for (int a : axes) out.push_back(a);
  }
  return out;
}

FuncEmitter::BlocksArgs FuncEmitter::blocksArgs(const ir::Value *v) {
  const ir::Type &t = v->type;
  const ShmapLayout *layout = me.blocksLayout(v);
  if (!layout) {
    llvm::Value *none = llvm::ConstantPointerNull::get(llvm::PointerType::get(me.ctx, 0));
    return {i32(0), none, dtypeCode(t.dtype), i32(t.rank()), me.i64Array(t.shape), none};
  }
  const ir::Mesh &mesh = *me.irm.meshes[(size_t)layout->mesh];
  return {i32((int64_t)mesh.sizes.size()), me.i64Array(mesh.sizes), dtypeCode(t.dtype), i32(t.rank()),
          me.i64Array(t.shape), me.i32Array(encodeSpec(layout->spec, t.rank()))};
}

// The runtime's arguments that name a value's group (groups, devices, device_groups, group, as
// shm_pipe_group_bytes and shm_pipe_from_group take them), then `more`.
std::vector<llvm::Value *> FuncEmitter::groupArgs(const ModuleEmitter::GroupOwner &owner,
                                                  std::initializer_list<llvm::Value *> more) {
  std::vector<llvm::Value *> args{i32(owner.groups), i32((int64_t)owner.deviceGroups.size()),
                                  me.i32Array(owner.deviceGroups), i32(owner.group)};
  args.insert(args.end(), more);
  return args;
}

llvm::Value *FuncEmitter::bytesOf(const ir::Value *v) {
  if (const ModuleEmitter::GroupOwner *owner = me.groupOwner(v))  // (all of it or none)
    return callRt("shm_pipe_group_bytes", groupArgs(*owner, {i64(v->type.byteSize())}), "group.bytes");
  if (!me.blocksLayout(v)) return i64(v->type.byteSize());
  return callRt("shm_blocks_bytes", blocksArgs(v).list(), "blocks.bytes");
}

void FuncEmitter::fillSplat(llvm::Value *dst, llvm::Value *bytes, const ir::Eqn &splat) {
  const ir::DType t = splat.outs[0]->type.dtype;
  callRt("shm_fill", {dst, bytes, me.dataArray(t, splat.doublesParam("value")), i32(ir::dtypeSize(t))});
}

llvm::Value *FuncEmitter::scratchFor(const ir::Value *v) {
  if (!me.sizedAtRunTime(v)) return scratch(v->type);
  return allocBlocks(nullptr, v);
}

// A value's blocks are freed after the last eqn that reads it (or a value sharing its buffer:
// a loop that took it), so a model's initial values, dead once the loop has started from them,
// are not held beside the loop's; a loop's or branch's scratch, after that eqn. Here (at the
// end of plan, the storage decided): the last eqn using each buffer, by the value owning it.
void FuncEmitter::planBlocksLastUse(const std::unordered_map<const ir::Value *, size_t> &lastRead) {
  auto note = [&](const ir::Value *v, size_t at) {
    const ir::Value *r = root(v);
    auto st = storage_.find(r);
    size_t &u = blocksLastUse_[st != storage_.end() && st->second.kind == StorageKind::Blocks ? r : v];
    u = std::max(u, at);
  };
  for (size_t i = 0; i < f.eqns.size(); ++i)
    for (const ir::Value *v : f.eqns[i].outs)
      if (me.sizedAtRunTime(v)) {
        note(v, i);
        auto r = lastRead.find(v);
        if (r != lastRead.end()) note(v, r->second);
      }
}

// Where one process runs every device, a value's blocks are all of it once (devices sharing
// a block share its slot): its bytes.
static int64_t blocksSlotBytes(int64_t bytes) { return (bytes + 63) / 64 * 64; }

llvm::Value *FuncEmitter::allocBlocks(const ir::Value *owner, const ir::Value *of) {
  // The free slot nearest its size (at least as big if one is), else a new one; a group's
  // values and blocks in slots apart (the runtime counts the group's bytes: blocks_report).
  const int64_t want = blocksSlotBytes(of->type.byteSize());
  const bool group = me.groupOwner(of) != nullptr;
  size_t best = blocksSlots_.size();
  auto better = [&](const BlocksSlot &s, const BlocksSlot &than) {
    const bool fits = s.oneProcessBytes >= want, thanFits = than.oneProcessBytes >= want;
    if (fits != thanFits) return fits;
    return fits ? s.oneProcessBytes < than.oneProcessBytes : s.oneProcessBytes > than.oneProcessBytes;
  };
  for (size_t k = 0; k < blocksSlots_.size(); ++k)
    if (blocksSlots_[k].free && blocksSlots_[k].group == group && (best == blocksSlots_.size() || better(blocksSlots_[k], blocksSlots_[best]))) best = k;
  if (best == blocksSlots_.size()) {
    blocksSlots_.push_back({});
    blocksSlots_.back().group = group;
    blocksSlots_.back().offset = llvm::cast<llvm::AllocaInst>(entryAlloca(me.i64Ty, 1, "blocks.offset"));
  }
  BlocksSlot &slot = blocksSlots_[best];
  slot.free = false;
  slot.holds.push_back(of);
  slot.oneProcessBytes = std::max(slot.oneProcessBytes, want);
  if (!blocksBase_) blocksBase_ = llvm::cast<llvm::AllocaInst>(entryAlloca(me.ptrTy, 1, "blocks.arena"));
  if (owner) ownedBlocks_.push_back({owner, best});
  else eqnBlocks_.push_back(best);
  llvm::Value *base = b.CreateLoad(me.ptrTy, blocksBase_);
  return b.CreateInBoundsGEP(me.i8Ty, base, b.CreateLoad(me.i64Ty, slot.offset), "blocks");
}

void FuncEmitter::freeDeadBlocks(size_t last) {
  for (size_t k : eqnBlocks_) blocksSlots_[k].free = true;
  eqnBlocks_.clear();
  std::vector<std::pair<const ir::Value *, size_t>> kept;
  for (const auto &[v, k] : ownedBlocks_) {
    auto u = blocksLastUse_.find(v);
    if (u != blocksLastUse_.end() && u->second <= last) blocksSlots_[k].free = true;
    else kept.push_back({v, k});
  }
  ownedBlocks_ = std::move(kept);
}

template <class T> static bool equalOrBothNull(const T *a, const T *b) { return a && b ? *a == *b : a == b; }

// On entry (the block blocksSetup_, before the body): each slot's bytes, the largest of its
// values' on this rank, rounded to 64 (shm_alloc's alignment), its offset, and the arena.
void FuncEmitter::emitBlocksArena() {
  if (blocksSlots_.empty()) return;
  llvm::IRBuilderBase::InsertPointGuard back(b);  // (callRt and bytesOf emit through b)
  b.SetInsertPoint(blocksSetup_->getTerminator());
  llvm::Value *total = i64(0), *groupTotal = i64(0);
  for (BlocksSlot &slot : blocksSlots_) {
    b.CreateStore(total, slot.offset);
    llvm::Value *most = i64(0);
    std::vector<const ir::Value *> asked;  // (values of one type and layout have one size)
    for (const ir::Value *v : slot.holds) {
      const bool same = std::any_of(asked.begin(), asked.end(), [&](const ir::Value *a) {
        return a->type == v->type && equalOrBothNull(me.blocksLayout(a), me.blocksLayout(v)) &&
               equalOrBothNull(me.groupOwner(a), me.groupOwner(v));
      });
      if (same) continue;
      asked.push_back(v);
      llvm::Value *bytes = b.CreateAnd(b.CreateAdd(bytesOf(v), i64(63)), i64(~int64_t(63)));
      most = b.CreateSelect(b.CreateICmpUGT(bytes, most), bytes, most);
    }
    total = b.CreateAdd(total, most, "blocks.end");
    if (slot.group) groupTotal = b.CreateAdd(groupTotal, most);
  }
  b.CreateStore(callRt("shm_blocks_alloc", {total, groupTotal}, "blocks.arena"), blocksBase_);
  if (FuncPlan *record = planRecord()) {
    record->blocksSlots = (int64_t)blocksSlots_.size();
    for (const BlocksSlot &slot : blocksSlots_) record->blocksBytesOneProcess += slot.oneProcessBytes;
  }
}

void FuncEmitter::copyValue(llvm::Value *dst, llvm::Value *src, const ir::Value *v) {
  if (!me.sizedAtRunTime(v)) return copyBytes(dst, src, v->type.byteSize());
  b.CreateMemCpy(dst, llvm::MaybeAlign(1), src, llvm::MaybeAlign(1), bytesOf(v));
}

// (A group's value: written as kept by its group's pipeline output, a splat, or what shares
// its buffer; the blocks form's other writers write blocks.)
bool FuncEmitter::writesBlocks(const ir::Eqn &e, size_t k) const {
  const ShmapLayout *layout = me.blocksLayout(e.outs[k]);
  const bool group = me.groupOwner(e.outs[k]) != nullptr;
  if (!layout && !group) return false;
  switch (e.prim) {
  case ir::Prim::Pipeline: return group;  // (HostForms: an output of the owning group)
  case ir::Prim::Shmap:  // its spec, and each rank's devices write its blocks (staysSplit)
    return layout && *layout == ShmapLayout{e.intParam("mesh"), e.specsParam("out_specs")[k]} && staysSplit(e, k);
  case ir::Prim::Load: return layout && !e.has("spec");
  case ir::Prim::PipeRecv: return layout != nullptr;  // (a message brings the rank's blocks: shm_pipe_recv_blocks)
  case ir::Prim::RandomNormal:
  case ir::Prim::RandomUniform: return layout != nullptr;
  case ir::Prim::Constant: return e.doublesParam("value").size() == 1;  // a splat
  case ir::Prim::Call:  // (the callee's, the bodies' values share the form)
  case ir::Prim::Loop:
  case ir::Prim::While:
  case ir::Prim::Cond: return true;
  default: return false;
  }
}

// `v`, computed whole (its buffer valid on this rank), to its blocks: a value the host
// computed, or a shmap output in another layout, that only shmaps read.
void FuncEmitter::convertToBlocks(const ir::Value *v) {
  llvm::Value *global = buffer(v);
  llvm::Value *blocks = allocBlocks(v, v);  // (v's root: a converted value has no alias)
  if (me.groupOwner(v)) {  // (the group's ranks keep all of it, the others nothing)
    b.CreateMemCpy(blocks, llvm::MaybeAlign(1), global, llvm::MaybeAlign(1), bytesOf(v));
    buffers_[v] = blocks;
    return;
  }
  std::vector<llvm::Value *> args = blocksArgs(v).list();
  args.push_back(global);
  args.push_back(blocks);
  callRt("shm_to_blocks", args);
  buffers_[v] = blocks;
}

void FuncEmitter::convertFromOwned(const ir::Value *v) {
  llvm::Value *whole = scratch(v->type);
  callRt("shm_pipe_from_group", groupArgs(*me.groupOwner(v), {buffer(v), whole, i64(v->type.byteSize())}));
  buffers_[v] = whole;
}

// A loop's or while body's carry j that a pipeline group keeps and updates: the pipeline's
// output from group g (its program's result k) is the carry's new value and its operand m the
// old one, which only that program reads, read last there; when the program computes the
// result by a fused loop that may write over the parameter (the optimizer's update), or by a
// shmap that reads the parameter last (the update placed on a tensor-parallel stage's devices,
// shmapUpdatesOver), the parameter and its new value are one buffer, in the loop and in the
// program. A stage's parameters and optimizer state are then held once on its ranks, not in
// two sets of buffers.
template <class UsedOnce, class OverParam>
void ModuleEmitter::donatePipelineCarries(const ir::Func &body, size_t i,
                                          const std::unordered_map<const ir::Value *, size_t> &lastRead,
                                          const UsedOnce &usedOnce, const OverParam &overParam,
                                          std::vector<bool> &inPlace) {
  const ir::Eqn &e = body.eqns[i];
  const size_t carries = body.results.size(), consts = body.params.size() - carries;
  for (size_t j = 0; j < carries; ++j) {
    const ir::Value *p = body.params[consts + j], *r = body.results[j];
    const GroupOwner *owner = groupOwner(p), *rOwner = groupOwner(r);
    auto last = lastRead.find(p);
    if (inPlace[j] || !owner || !rOwner || !(*owner == *rOwner) || last == lastRead.end() || last->second != i)
      continue;
    auto o = std::find(e.outs.begin(), e.outs.end(), r);
    auto m = std::find(e.ins.begin(), e.ins.end(), p);
    if (o == e.outs.end() || m == e.ins.end() || std::count(e.ins.begin(), e.ins.end(), p) != 1 ||
        factsOf(body).timesReturned.at(r) != 1)
      continue;
    size_t k = (size_t)(o - e.outs.begin()), g = 0;  // (the groups' results one after another)
    while (g < e.bodies.size() && k >= e.bodies[g]->results.size()) k -= e.bodies[g++]->results.size();
    const size_t mi = (size_t)(m - e.ins.begin());
    if (g >= e.bodies.size() || (int)g != owner->group || !usedOnce(e.bodies[g]) ||
        !(overParam(*e.bodies[g], k, mi) || shmapUpdatesOver(*e.bodies[g], k, mi)))
      continue;
    inPlace[j] = true;
    donatedResults[e.bodies[g]].push_back({k, mi});
  }
}

// Whether a function returns r once and its parameter p not at all (so p's buffer may become
// r's).
static bool returnedOnceAlone(const ModuleEmitter::FuncFacts &facts, const ir::Value *r, const ir::Value *p) {
  auto times = [&](const ir::Value *v) {
    auto it = facts.timesReturned.find(v);
    return it == facts.timesReturned.end() ? size_t(0) : it->second;
  };
  return times(r) == 1 && times(p) == 0;
}

// Whether stage program `program`'s result k is the output of a shmap that reads the program's
// parameter m last, of the same type, both kept whole: the shmap may then write it over the
// parameter, its devices writing their blocks once all of them have read theirs (the runtime's
// SHM_OUT_OVER_INPUT, which emitShmap sets where an output's buffer is an input's). Devices
// that share a block (a spec that leaves out a mesh axis: replicated over "data") could not
// update it in place one by one.
bool ModuleEmitter::shmapUpdatesOver(const ir::Func &program, size_t k, size_t m) {
  if (k >= program.results.size() || m >= program.params.size()) return false;
  const ir::Value *r = program.results[k], *p = program.params[m];
  const FuncFacts &facts = factsOf(program);
  if (!returnedOnceAlone(facts, r, p) || !(r->type == p->type) || blocksLayout(p) || blocksLayout(r)) return false;
  auto def = facts.definedBy.find(r);
  auto last = facts.lastRead.find(p);
  if (def == facts.definedBy.end() || last == facts.lastRead.end()) return false;
  const ir::Eqn &e = program.eqns[def->second];
  return e.prim == ir::Prim::Shmap && std::count(e.ins.begin(), e.ins.end(), p) == 1 && last->second == def->second;
}

const ModuleEmitter::FuncFacts &ModuleEmitter::factsOf(const ir::Func &f) {
  auto [it, fresh] = funcFacts.try_emplace(&f);
  FuncFacts &facts = it->second;
  if (!fresh) return facts;
  facts.lastRead = FuncEmitter::lastReads(f);
  facts.groupOf = FuncEmitter::fusionGroups(f, facts.lastRead, facts.groups);
  facts.renamed = FuncEmitter::renamedValues(f);
  for (size_t i = 0; i < f.eqns.size(); ++i)
    for (const ir::Value *v : f.eqns[i].outs) facts.definedBy.emplace(v, i);
  for (const ir::Value *v : f.results) ++facts.timesReturned[v];
  return facts;
}

// A loop's or while body's carry j whose new value a shmap computes from the old one can be
// updated in place: `p_new = shmap(..., p, ...)` where p is the carry's parameter and read last
// there, both in the blocks form with the shmap's spec. Where every local device has its own
// block (the spec names every mesh axis of size > 1, so no two devices share a slot) and the
// shmap body computes the result by a fused loop that may write over that parameter
// (FuncEmitter::overwritable), each device updates its block in place; otherwise (a Megatron
// weight's blocks, shared by the devices along "data") each computes its block apart and the
// shmap writes them over the carry once every device has read it (SHM_OUT_OVER_INPUT). The
// optimizer's update of parameters and moments kept on the devices then holds them once, not
// in two sets of buffers.
void ModuleEmitter::findDonatedCarries(const std::unordered_map<const ir::Func *, int> &uses) {
  auto usedOnce = [&](const ir::Func *f) {
    auto it = uses.find(f);
    return it != uses.end() && it->second == 1;
  };
  // Which result of shmap body `body` may be computed over its parameter m (-1: none).
  auto overParam = [&](const ir::Func &body, size_t k, size_t m) {
    if (k >= body.results.size() || m >= body.params.size()) return false;
    const ir::Value *r = body.results[k], *p = body.params[m];
    const FuncFacts &facts = factsOf(body);
    if (!returnedOnceAlone(facts, r, p)) return false;
    auto def = facts.definedBy.find(r);
    if (def == facts.definedBy.end()) return false;
    const size_t i = def->second;
    if (facts.groupOf[i] < 0 || r->type.byteSize() != p->type.byteSize() || r->type.numElements() <= 1) return false;
    const auto &[first, last] = facts.groups[(size_t)facts.groupOf[i]];
    return FuncEmitter::overwritable(body, first, last, i, p, facts.lastRead, facts.renamed);
  };
  for (const auto &f : irm.funcs)
    for (const ir::Eqn &w : f->eqns) {
      const bool isWhile = w.prim == ir::Prim::While && w.bodies.size() == 2;
      const bool isLoop = w.prim == ir::Prim::Loop && w.bodies.size() == 1;
      if ((!isWhile && !isLoop) || !usedOnce(w.bodies.back())) continue;
      const ir::Func &body = *w.bodies.back();  // (a loop body's params: i, consts..., carries...)
      const size_t carries = body.results.size(), consts = body.params.size() - carries;
      std::vector<bool> &inPlace = carriesInPlace[&body];
      inPlace.resize(carries, false);
      // (unordered_map keeps its elements in place as it grows: the reference stays good)
      const FuncFacts &facts = factsOf(body);
      const std::unordered_map<const ir::Value *, size_t> &lastRead = facts.lastRead;
      for (size_t i = 0; i < body.eqns.size(); ++i)
        if (body.eqns[i].prim == ir::Prim::Pipeline) donatePipelineCarries(body, i, lastRead, usedOnce, overParam, inPlace);
      // (each carry at the one eqn that can update it, the one reading its parameter last)
      for (size_t j = 0; j < carries; ++j) {
        const ir::Value *p = body.params[consts + j], *r = body.results[j];
        auto lr = lastRead.find(p);
        if (lr == lastRead.end() || body.eqns[lr->second].prim != ir::Prim::Shmap) continue;
        const ir::Eqn &e = body.eqns[lr->second];
        const ir::Mesh &mesh = *irm.meshes[(size_t)e.intParam("mesh")];
        const ShmapLayout *layout = blocksLayout(r);
        if (inPlace[j] || !layout || !blocksLayout(p) || !(*blocksLayout(p) == *layout)) continue;
        auto k = std::find(e.outs.begin(), e.outs.end(), r);
        auto m = std::find(e.ins.begin(), e.ins.end(), p);
        if (k == e.outs.end() || m == e.ins.end() || std::count(e.ins.begin(), e.ins.end(), p) != 1 ||
            facts.timesReturned.at(r) != 1)
          continue;
        const size_t ko = (size_t)(k - e.outs.begin()), mi = (size_t)(m - e.ins.begin());
        bool ownBlocks = true;  // every device its own slot
        for (size_t a = 0; a < mesh.sizes.size(); ++a)
          if (mesh.sizes[a] > 1 && !(layout->spec.axes() >> a & 1)) ownBlocks = false;
        if (!(*layout == ShmapLayout{e.intParam("mesh"), e.specsParam("out_specs")[ko]}) ||
            !(*layout == ShmapLayout{e.intParam("mesh"), e.specsParam("in_specs")[mi]}))
          continue;
        inPlace[j] = true;
        // (otherwise each device computes its block apart and the shmap writes them over the
        // carry once every device has read it: SHM_OUT_OVER_INPUT)
        if (ownBlocks && usedOnce(e.bodies[0]) && overParam(*e.bodies[0], ko, mi))
          donatedResults[e.bodies[0]].push_back({ko, mi});
      }
    }
}

} // namespace shmapc::codegen
