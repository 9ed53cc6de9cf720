// One IR Func -> one LLVM function void(ptr dev, ptr outs, ptr ins): decides where every
// value's buffer lives (the storage plan), then lowers the equations in order, freeing each
// heap buffer right after its last use so peak memory follows the program's live values.
#include "codegen/CodegenContext.h"

#include <llvm/IR/Constants.h>

namespace shmapc::codegen {

// Values at most this big live on the stack: scalars and tiny arrays (loop counters, sums)
// cost no allocator call, and mem2reg turns most of them into registers.
static constexpr int64_t kStackBytes = 64;

FuncEmitter::FuncEmitter(ModuleEmitter &me, const ir::Func &f)
    : me(me), f(f), fn(me.funcs.at(&f)), b(me.ctx), entry_(me.ctx) {}

const ir::Value *FuncEmitter::root(const ir::Value *v) const {
  auto it = storage_.find(v);
  if (it != storage_.end() && it->second.kind == StorageKind::Alias) return it->second.aliasOf;
  return v;
}

void FuncEmitter::plan() {
  for (size_t i = 0; i < f.params.size(); ++i)
    storage_[f.params[i]] = {StorageKind::Param, (int)i, nullptr};
  // A result computed by an eqn is written straight into the caller's buffer; a parameter
  // returned as a result, or a value returned twice, is copied at the end (emitResults).
  for (size_t i = 0; i < f.results.size(); ++i)
    if (!storage_.count(f.results[i]))
      storage_[f.results[i]] = {StorageKind::OutSlot, (int)i, nullptr};

  // Fusion groups: maximal runs of consecutive fusible eqns with one output shape. An eqn
  // with a one-element result (a scalar constant, the `c * 0.001` of `y * 1.5 + c * 0.001`
  // before its broadcast) joins any group: its value is the same in every iteration (LLVM
  // hoists it), so chains of `y = y * a + b` fuse into one loop.
  std::vector<int> groupOf(f.eqns.size(), -1);
  std::vector<std::vector<int64_t>> groupShape;  // the loop's shape
  std::vector<bool> onlyUnits;                   // a group of one-element results so far
  auto isUnit = [](const ir::Eqn &e) { return e.outs[0]->type.numElements() == 1; };
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    const ir::Eqn &e = f.eqns[i];
    if (!isFusible(e)) continue;
    const std::vector<int64_t> &shape = e.outs[0]->type.shape;
    bool unit = isUnit(e);
    bool adjacent = !groups_.empty() && groups_.back().second + 1 == i;
    if (adjacent && (shape == groupShape.back() || unit || onlyUnits.back())) {
      groups_.back().second = i;
      if (!unit && onlyUnits.back()) groupShape.back() = shape;
      onlyUnits.back() = onlyUnits.back() && unit;
    } else {
      groups_.push_back({i, i});
      groupShape.push_back(shape);
      onlyUnits.push_back(unit);
    }
    groupOf[i] = (int)groups_.size() - 1;
  }
  // A value computed in a group needs a buffer only if something outside the group reads it.
  std::unordered_map<const ir::Value *, int> definedIn;
  std::unordered_map<const ir::Value *, bool> usedOutside;
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    for (const ir::Value *v : f.eqns[i].ins) {
      auto it = definedIn.find(v);
      if (it != definedIn.end() && it->second != groupOf[i]) usedOutside[v] = true;
    }
    for (const ir::Value *v : f.eqns[i].outs) definedIn[v] = groupOf[i];
  }

  for (size_t i = 0; i < f.eqns.size(); ++i) {
    const ir::Eqn &e = f.eqns[i];
    for (const ir::Value *v : e.outs) {
      if (storage_.count(v)) continue;  // a result
      Storage s;
      if (groupOf[i] >= 0 && !usedOutside[v])
        s.kind = StorageKind::Fused;
      else if ((e.prim == ir::Prim::Reshape || e.prim == ir::Prim::Pbroadcast) &&
               storage_[root(e.ins[0])].kind != StorageKind::Fused)
        s = {StorageKind::Alias, -1, root(e.ins[0])};  // same bytes: share the buffer
      else if (e.prim == ir::Prim::Constant && e.doublesParam("value").size() > 1)
        s.kind = StorageKind::Global;
      else if (v->type.byteSize() <= kStackBytes)
        s.kind = StorageKind::Stack;
      else
        s.kind = StorageKind::Heap;
      storage_[v] = s;
    }
  }

  // Free points: the last eqn reading a heap buffer directly or through an alias.
  std::unordered_map<const ir::Value *, size_t> last;
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    auto touch = [&](const ir::Value *v) {
      const ir::Value *r = root(v);
      if (storage_[r].kind == StorageKind::Heap) last[r] = i;
    };
    for (const ir::Value *v : f.eqns[i].ins) touch(v);
    for (const ir::Value *v : f.eqns[i].outs) touch(v);
  }
  freeAt_.assign(f.eqns.size(), {});
  for (auto &[v, i] : last) freeAt_[i].push_back(v);
}

bool FuncEmitter::emit() {
  // Allocas go in their own entry block so they stay static (and promotable) wherever the
  // lowering currently inserts.
  llvm::BasicBlock *allocas = llvm::BasicBlock::Create(me.ctx, "allocas", fn);
  llvm::BasicBlock *body = llvm::BasicBlock::Create(me.ctx, "body", fn);
  entry_.SetInsertPoint(allocas);
  entry_.SetInsertPoint(entry_.CreateBr(body));
  b.SetInsertPoint(body);
  dev = fn->getArg(0);
  outsArg = fn->getArg(1);
  insArg = fn->getArg(2);
  dev->setName("dev");
  outsArg->setName("outs");
  insArg->setName("ins");

  plan();
  for (size_t i = 0; i < f.params.size(); ++i)
    buffers_[f.params[i]] = b.CreateLoad(me.ptrTy, b.CreateConstGEP1_64(me.ptrTy, insArg, i),
                                         "in" + std::to_string(i));
  for (size_t i = 0; i < f.results.size(); ++i) {
    const Storage &s = storage_[f.results[i]];
    if (s.kind == StorageKind::OutSlot && s.slot == (int)i)
      buffers_[f.results[i]] = b.CreateLoad(
          me.ptrTy, b.CreateConstGEP1_64(me.ptrTy, outsArg, i), "out" + std::to_string(i));
  }

  size_t nextGroup = 0;
  for (size_t i = 0; i < f.eqns.size();) {
    size_t last = i;
    if (nextGroup < groups_.size() && groups_[nextGroup].first == i) {
      last = groups_[nextGroup++].second;
      for (size_t k = i; k <= last; ++k) allocateOuts(f.eqns[k]);
      if (!emitElementwiseGroup(i, last)) return false;
    } else {
      allocateOuts(f.eqns[i]);
      if (!emitEqn(i)) return false;
    }
    if (!me.error.empty()) return false;
    freeBuffersDeadAfter(i, last);
    i = last + 1;
  }
  emitResults();
  for (llvm::Value *p : scratch_) callRt("shm_free", {p});
  b.CreateRetVoid();
  return me.error.empty();
}

void FuncEmitter::allocateOuts(const ir::Eqn &e) {
  for (const ir::Value *v : e.outs) {
    const Storage &s = storage_[v];
    std::string name = (v->hint.empty() ? "v" + std::to_string(v->id) : v->hint) + ".buf";
    switch (s.kind) {
    case StorageKind::Param:
    case StorageKind::OutSlot:  // loaded on entry
    case StorageKind::Global:   // set by emitConstant
    case StorageKind::Fused: break;
    case StorageKind::Alias: buffers_[v] = buffer(s.aliasOf); break;
    case StorageKind::Stack:
      buffers_[v] = entryAlloca(me.i8Ty, std::max<int64_t>(1, v->type.byteSize()), name.c_str());
      break;
    case StorageKind::Heap:
      buffers_[v] = callRt("shm_alloc", {i64(v->type.byteSize())});
      buffers_[v]->setName(name);
      break;
    }
  }
}

void FuncEmitter::freeBuffersDeadAfter(size_t first, size_t last) {
  for (size_t i = first; i <= last; ++i)
    for (const ir::Value *v : freeAt_[i]) callRt("shm_free", {buffer(v)});
}

void FuncEmitter::emitResults() {
  for (size_t i = 0; i < f.results.size(); ++i) {
    const ir::Value *v = f.results[i];
    const Storage &s = storage_[v];
    if (s.kind == StorageKind::OutSlot && s.slot == (int)i) continue;
    llvm::Value *dst = b.CreateLoad(me.ptrTy, b.CreateConstGEP1_64(me.ptrTy, outsArg, i));
    copyBytes(dst, buffer(v), v->type.byteSize());
  }
}

llvm::Value *FuncEmitter::buffer(const ir::Value *v) {
  auto it = buffers_.find(v);
  if (it != buffers_.end()) return it->second;
  fail("internal error: value %" + std::to_string(v->id) + " has no buffer");
  return llvm::ConstantPointerNull::get(llvm::PointerType::get(me.ctx, 0));
}

llvm::Value *FuncEmitter::entryAlloca(llvm::Type *t, int64_t count, const char *name) {
  llvm::AllocaInst *a = entry_.CreateAlloca(t, i64(count), name);
  a->setAlignment(llvm::Align(16));
  return a;
}

llvm::Value *FuncEmitter::ptrArray(const std::vector<llvm::Value *> &ptrs) {
  if (ptrs.empty()) return llvm::ConstantPointerNull::get(llvm::PointerType::get(me.ctx, 0));
  llvm::Value *arr = entryAlloca(me.ptrTy, (int64_t)ptrs.size(), "ptrs");
  for (size_t i = 0; i < ptrs.size(); ++i)
    b.CreateStore(ptrs[i], b.CreateConstGEP1_64(me.ptrTy, arr, i));
  return arr;
}

llvm::Value *FuncEmitter::scratch(const ir::Type &t) {
  if (t.byteSize() <= kStackBytes)
    return entryAlloca(me.i8Ty, std::max<int64_t>(1, t.byteSize()), "scratch");
  llvm::Value *p = callRt("shm_alloc", {i64(t.byteSize())});
  scratch_.push_back(p);
  return p;
}

llvm::CallInst *FuncEmitter::callRt(const std::string &name, std::vector<llvm::Value *> args) {
  return b.CreateCall(me.runtime(name), args);
}

// memcpy rather than shm_copy: LLVM knows its semantics (small copies become loads/stores).
void FuncEmitter::copyBytes(llvm::Value *dst, llvm::Value *src, int64_t bytes) {
  if (bytes > 0) b.CreateMemCpy(dst, llvm::MaybeAlign(1), src, llvm::MaybeAlign(1), bytes);
}

llvm::Value *FuncEmitter::i32List(const std::vector<int64_t> &v) {
  return me.i32Array(std::vector<int32_t>(v.begin(), v.end()));
}

llvm::Value *FuncEmitter::startIndices(const std::vector<ir::Value *> &scalars) {
  llvm::Value *arr = entryAlloca(me.i64Ty, std::max<size_t>(1, scalars.size()), "starts");
  for (size_t d = 0; d < scalars.size(); ++d) {
    llvm::Value *s = b.CreateLoad(me.i32Ty, buffer(scalars[d]));
    b.CreateStore(b.CreateSExt(s, me.i64Ty), b.CreateConstGEP1_64(me.i64Ty, arr, d));
  }
  return arr;
}

} // namespace shmapc::codegen
