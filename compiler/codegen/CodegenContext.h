// Shared state of the LLVM code generator: a ModuleEmitter per IR module (types, runtime
// declarations, constant globals, the LLVM function of every IR Func) and a FuncEmitter per
// IR Func (where each IR value's buffer lives, and the lowering of its equations).
// Internal to compiler/codegen; the public interface is Codegen.h.
#pragma once
#include "codegen/Codegen.h"
#include "codegen/Plan.h"
#include "forms/HostForms.h"
#include "ir/IR.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace llvm {
class TargetMachine;
}

namespace shmapc::codegen {

// Creates the TargetMachine for `target` (PIC); null with `error` set on failure.
std::unique_ptr<llvm::TargetMachine> createTargetMachine(const Target &target, int optLevel, std::string &error);

using forms::ShmapLayout;

class ModuleEmitter {
public:
  ModuleEmitter(const ir::Module &irm, llvm::LLVMContext &ctx, llvm::Module &mod,
                const Target &target = Target::native());

  const ir::Module &irm;
  llvm::LLVMContext &ctx;
  llvm::Module &mod;
  // The CPU the code is for (--target-cpu): its LLVM CPU name and features (the start-up
  // check of the CPU lists target.checked).
  const Target &target;
  llvm::Type *voidTy, *ptrTy, *i8Ty, *i32Ty, *i64Ty;
  std::map<const ir::Func *, llvm::Function *> funcs;
  // While bodies (used by one while alone) -> the carries they update in place
  // (FuncEmitter::carriesInPlace): the caller passes one buffer for the carry's old and new value.
  std::unordered_map<const ir::Func *, std::vector<bool>> carriesInPlace;
  // Shmap bodies -> (result, parameter) pairs whose result each device computes over its
  // block of the parameter (findDonatedCarries): the caller passes one buffer for both.
  std::unordered_map<const ir::Func *, std::vector<std::pair<size_t, size_t>>> donatedResults;
  // Blocks.cpp: loop carries in the blocks form that a shmap updates (the optimizer's update of
  // sharded parameters and moments), each device over its own block: in place, one buffer
  // instead of two. `uses`: how many eqns run each body.
  void findDonatedCarries(const std::unordered_map<const ir::Func *, int> &uses);
  template <class UsedOnce, class OverParam>
  void donatePipelineCarries(const ir::Func &body, size_t eqn, const std::unordered_map<const ir::Value *, size_t> &lastRead,
                             const UsedOnce &usedOnce, const OverParam &overParam, std::vector<bool> &inPlace);
  bool shmapUpdatesOver(const ir::Func &program, size_t k, size_t m);
  // What findDonatedCarries and carriesInPlace ask of a function (its eqns' last reads,
  // definitions, fusion groups, renamed values, how often it returns each value), found once
  // per function: asked again for every candidate carry it would make compile time carries x
  // program size.
  struct FuncFacts {
    std::unordered_map<const ir::Value *, size_t> lastRead, definedBy, timesReturned;
    std::vector<std::pair<size_t, size_t>> groups;
    std::vector<int> groupOf;
    std::unordered_set<const ir::Value *> renamed;
  };
  const FuncFacts &factsOf(const ir::Func &f);
  std::unordered_map<const ir::Func *, FuncFacts> funcFacts;
  std::string error;  // the first failure

  // How each host value is kept (forms/HostForms.h: whole, as blocks, or by a pipeline
  // group), found once before any function is emitted.
  void findSplitLayouts() { forms_ = forms::findHostForms(irm); }
  // The layout every read of `v` uses, or null if something reads it whole (host code, a
  // result, a carry, two layouts) or nothing reads it (`unread` then set).
  const ShmapLayout *splitLayout(const ir::Value *v, bool *unread = nullptr) const {
    auto it = forms_.splitLayouts.find(v);
    if (unread) *unread = forms_.unread.count(v) != 0;
    return it == forms_.splitLayouts.end() ? nullptr : &it->second;
  }
  // The layout of a host value kept in the blocks form (SHM_BLOCKS: each rank holds only its
  // devices' blocks), or null.
  const ShmapLayout *blocksLayout(const ir::Value *v) const { return forms_.blocksLayout(v); }
  // The device group of a pipeline whose ranks alone keep a host value, or null: under MPI,
  // where a rank's devices lie in one group, the other ranks hold none of it (0 bytes, sized
  // at run time as the blocks form is); one process holds it whole. Pipeline outputs in this
  // form are not broadcast after the pipeline.
  using GroupOwner = forms::GroupOwner;
  const GroupOwner *groupOwner(const ir::Value *v) const { return forms_.groupOwner(v); }
  // A loop's output kept by a group that host code after the loop reads whole: the loop's
  // last value is broadcast from the group's ranks into a whole buffer (convertFromOwned).
  bool wholeAfterLoop(const ir::Value *loopOutput) const { return forms_.wholeAfterLoop.count(loopOutput) != 0; }
  // Whether v's bytes on a rank are known only at run time: the blocks form or a group's.
  bool sizedAtRunTime(const ir::Value *v) const { return blocksLayout(v) || groupOwner(v); }
  // A pipeline message's other end: for a pipe_send its receiver's value, for a pipe_recv its
  // sender's, each end kept in its own form (whole or blocks).
  const ir::Value *messagePeer(const ir::Eqn &sendOrRecv) const {
    auto it = forms_.messagePeers.find(&sendOrRecv);
    return it == forms_.messagePeers.end() ? nullptr : it->second;
  }

  bool fail(const std::string &msg) {
    if (error.empty()) error = msg;
    return false;
  }
  llvm::FunctionType *funcType() const;  // void(ptr dev, ptr outs, ptr ins)
  // The type of an element in memory (f16 / bf16: i16 bit patterns) and inside a fused loop
  // (f16 / bf16: the f32 value it stands for; others as in memory).
  llvm::Type *elemType(ir::DType t) const;
  llvm::Type *computeType(ir::DType t) const;
  // A runtime entry point of shmap_runtime.h, declared on first use.
  llvm::FunctionCallee runtime(const std::string &name);
  // `name` ("exp", "log", "sin", "cos", "tanh", "pow") of float or double args: the
  // compiler's own functions, the same bits on every CPU (Math.h).
  llvm::Value *mathFunction(llvm::IRBuilder<> &b, const std::string &name, const std::vector<llvm::Value *> &args);
  size_t mathCalls = 0;  // calls mathFunction has emitted (a fused loop interleaves if any)
  bool inlineMath = true;  // inline them (Math.h), or call them (loops with many calls)
  // Private constant globals (deduplicated): shapes and int lists, axis lists, strings.
  llvm::Constant *i64Array(const std::vector<int64_t> &v);
  llvm::Constant *i32Array(const std::vector<int32_t> &v);
  llvm::Constant *cString(const std::string &s);
  // A private constant array of pointers to constants (savez's member names): no stores.
  llvm::Constant *constPtrArray(const std::vector<llvm::Constant *> &ptrs);
  // ptr f(ptr p): p, through an asm the optimizer cannot see into, never inlined: a pointer
  // it cannot trace back to its object, made by a call (FuncEmitter::ptrArray).
  llvm::Function *opaquePointer();
  // A constant global holding `values` converted to `t`'s element type.
  llvm::Constant *dataArray(ir::DType t, const std::vector<double> &values);
  // The files of the program's locations (emitLLVM's `sources`; may be null).
  const SourceManager *sources = nullptr;
  // --emit=plan: where each FuncEmitter records its decisions (emitLLVM's `plan`; null: none).
  Plan *plan = nullptr;
  // "prog.smp:12:9" (the path as the diagnostics show it) as a constant string, or null
  // where the location or the files are unknown.
  llvm::Constant *locationString(Loc loc);

private:
  forms::HostForms forms_;
  std::map<std::vector<int64_t>, llvm::Constant *> i64Arrays_;
  std::map<std::vector<int32_t>, llvm::Constant *> i32Arrays_;
  std::map<std::string, llvm::Constant *> strings_;
  llvm::Function *opaquePointer_ = nullptr;
};

class FuncEmitter {
public:
  FuncEmitter(ModuleEmitter &me, const ir::Func &f);
  bool emit();

  // ---- used by the lowering files
  ModuleEmitter &me;
  const ir::Func &f;
  llvm::Function *fn;
  llvm::IRBuilder<> b;
  llvm::Value *dev = nullptr, *outsArg = nullptr, *insArg = nullptr;

  bool fail(const std::string &msg) { return me.fail(f.name + ": " + msg); }
  // The buffer of `v`: defined before (or, for an eqn's outs, allocated before lowering it).
  llvm::Value *buffer(const ir::Value *v);
  llvm::Value *i32(int64_t x) { return b.getInt32((uint32_t)x); }
  llvm::Value *i64(int64_t x) { return b.getInt64((uint64_t)x); }
  llvm::Value *dtypeCode(ir::DType t) { return i32((int)t); }  // the enum order is SHM_F32..
  // An alloca'd array of pointers (ins / outs of a call), in the entry block.
  llvm::Value *ptrArray(const std::vector<llvm::Value *> &ptrs);
  llvm::Value *entryAlloca(llvm::Type *t, int64_t count, const char *name);
  // A scratch buffer outside the storage plan (loop carries): heap-allocated, freed on return.
  llvm::Value *scratch(const ir::Type &t);
  // A call of a runtime entry point. Before a collective's (shm_psum, shm_all_gather, ...: every
  // one that waits for its group), the store of the source location of the equation being
  // lowered into the device's first word (shmap_runtime.h), which the watchdog's report names.
  llvm::CallInst *callRt(const std::string &name, std::vector<llvm::Value *> args, const char *result = "");
  void copyBytes(llvm::Value *dst, llvm::Value *src, int64_t bytes);
  // Values in either form (Blocks.cpp): v's bytes (known at run time for the blocks form), a
  // scratch buffer for it, a copy of it; the runtime's arguments that describe its blocks
  // (for a whole value: no mesh and no spec, null pointers).
  llvm::Value *bytesOf(const ir::Value *v);
  llvm::Value *scratchFor(const ir::Value *v);
  void copyValue(llvm::Value *dst, llvm::Value *src, const ir::Value *v);
  struct BlocksArgs {
    llvm::Value *meshRank, *meshSizes, *dtype, *rank, *shape, *spec;
    // (in the order shm_blocks_bytes and shm_to_blocks take them)
    std::vector<llvm::Value *> list() const { return {meshRank, meshSizes, dtype, rank, shape, spec}; }
  };
  BlocksArgs blocksArgs(const ir::Value *v);
  // A splat constant's value into `bytes` of `dst` (shm_fill).
  void fillSplat(llvm::Value *dst, llvm::Value *bytes, const ir::Eqn &splat);
  // Whether eqn e writes its output k in the blocks form itself; a blocks value another eqn
  // computes is converted after it (convertToBlocks).
  bool writesBlocks(const ir::Eqn &e, size_t k) const;
  void convertToBlocks(const ir::Value *v);
  // After a loop, its output kept by a group (ModuleEmitter::wholeAfterLoop) made whole on
  // every rank: copied into a buffer of its own and broadcast from the group's first rank.
  void convertFromOwned(const ir::Value *v);
  std::vector<llvm::Value *> groupArgs(const ModuleEmitter::GroupOwner &owner, std::initializer_list<llvm::Value *> more);
  // A buffer in the blocks form for a value of `of`'s type and layout: `owner`'s (free again
  // after its last use), or, owner null, scratch of the eqn being lowered (free after it);
  // freeDeadBlocks(last) frees them once eqns up to `last` are emitted. The buffers are slots
  // of the call's blocks arena (one allocation a call, sized at run time: emitBlocksArena).
  llvm::Value *allocBlocks(const ir::Value *owner, const ir::Value *of);
  void freeDeadBlocks(size_t last);
  void emitBlocksArena();
  void planBlocksLastUse(const std::unordered_map<const ir::Value *, size_t> &lastRead);
  // Whether operand k of e is a loop's initial carry; a carry's initial value into `dst` (a
  // splat without a buffer: filled).
  static bool initialCarry(const ir::Eqn &e, size_t k);
  void initCarry(llvm::Value *dst, const ir::Value *init, const ir::Value *carry);
  llvm::Value *i32List(const std::vector<int64_t> &v);  // int param -> i32 global array
  // --emit=plan: records that eqn `eqn` calls the runtime kernel `call` (in words: its entry
  // point and the arguments that choose its work). Nothing unless a plan is recorded.
  void noteKernel(size_t eqn, const std::string &call);

  // ---- lowerings; each returns false after fail() on error. A primitive's own lowering is
  // its `lower` rule in compiler/prims/; emitEqn dispatches to it.
  bool emitEqn(size_t index);
  bool emitElementwiseGroup(size_t first, size_t last);  // Elementwise.cpp
  bool emitGroupBody(size_t first, size_t last, llvm::IRBuilder<> &lb,
                     const std::function<llvm::Value *(const ir::Value *)> &bufferOf, llvm::Value *idx, int64_t n,
                     llvm::Value *rowStart = nullptr, llvm::Value *concatSource = nullptr);
  int64_t groupRowLength(size_t first, size_t last, int64_t n) const;
  bool storedByGroup(const ir::Value *v) const;
  void interleave(llvm::BranchInst *latch, int count);
  // ControlFlow.cpp: the higher-order primitives' lowerings
  bool emitCall(const ir::Eqn &e);
  bool emitShmap(const ir::Eqn &e);
  bool emitPipeline(const ir::Eqn &e);
  bool staysSplit(const ir::Eqn &e, size_t k) const;  // SHM_OUT_STAYS_SPLIT for output k
  bool emitLoop(const ir::Eqn &e);
  bool emitWhile(const ir::Eqn &e);
  bool emitCond(const ir::Eqn &e);
  // reshape, pbroadcast: the bytes are unchanged; the output aliases the input unless it must
  // land in a result buffer (a copy then).
  bool emitCopy(const ir::Eqn &e);
  // An i64 array of the runtime start indices (loaded from i32[] scalar buffers), for the
  // dynamic slice kernels.
  llvm::Value *startIndices(const std::vector<ir::Value *> &scalars);

  // Whether an eqn can be computed inside a fused element-wise loop (Elementwise.cpp).
  static bool isFusible(const ir::Eqn &e);
  static bool readsAtOwnIndex(const ir::Eqn &e);
  // Fusion groups, and what writing in place over a value needs (FuncEmitter.cpp).
  static std::unordered_map<const ir::Value *, size_t> lastReads(const ir::Func &f);
  static std::vector<int> fusionGroups(const ir::Func &f, const std::unordered_map<const ir::Value *, size_t> &lastRead,
                                       std::vector<std::pair<size_t, size_t>> &groups);
  static std::unordered_set<const ir::Value *> renamedValues(const ir::Func &f);
  static bool renamesOperand(const ir::Func &f, const ir::Eqn &e);
  static bool isContiguousSlice(const ir::Eqn &e, int64_t *offsetBytes);
  static bool overwritable(const ir::Func &f, size_t first, size_t last, size_t i, const ir::Value *x,
                           const std::unordered_map<const ir::Value *, size_t> &lastRead,
                           const std::unordered_set<const ir::Value *> &renamed);
  // ControlFlow.cpp: which carries of a while or loop body it may update in place, from the
  // body's facts (ModuleEmitter::factsOf)
  static std::vector<bool> carriesInPlace(const ir::Func &body, const ModuleEmitter::FuncFacts &facts);
  // A splat constant that a fused loop recomputes where it reads it: it has no buffer there.
  bool recomputedInLoops(const ir::Value *v) const {
    return splatConstants_.count(v) && storage(v).kind == StorageKind::Fused;
  }

  const Storage &storage(const ir::Value *v) const { return storage_.at(v); }
  // The value whose buffer `v` uses (itself unless an Alias).
  const ir::Value *root(const ir::Value *v) const;
  void setBuffer(const ir::Value *v, llvm::Value *p) { buffers_[v] = p; }

private:
  void plan();
  void allocateOuts(const ir::Eqn &e);
  llvm::Value *materialize(const ir::Value *v);
  void markTopLevel();
  void planArena(const std::vector<int> &groupOf);
  const ir::Value *donor(size_t i, const ir::Value *v, const std::vector<int> &groupOf,
                         const std::unordered_map<const ir::Value *, size_t> &lastRead);
  void emitResults();
  FuncPlan *planRecord();  // --emit=plan: this function's entry in me.plan (null: none recorded)

  int planIndex_ = -1;  // (its index in me.plan->funcs)

  llvm::IRBuilder<> entry_;  // inserts allocas at the top of the entry block
  Loc eqnLoc_;               // the location of the equation emitEqn lowers
  std::unordered_map<const ir::Value *, Storage> storage_;
  std::unordered_map<const ir::Value *, llvm::Value *> buffers_;
  std::unordered_map<const ir::Value *, size_t> paramIndex_;  // (f.params' positions)
  llvm::BasicBlock *markBlock_ = nullptr;   // pointers made on demand go into this block,
  llvm::Instruction *markAfter_ = nullptr;  // after this instruction (null: at its start)
  // The arena: one shm_alloc per call holding every Heap value at its offset.
  std::unordered_map<const ir::Value *, int64_t> arenaOffset_;
  int64_t arenaBytes_ = 0;
  llvm::Value *arena_ = nullptr;
  std::vector<std::pair<size_t, size_t>> groups_;  // fused element-wise eqn ranges, in order
  // Constants of one repeated value, by output: every fused loop that reads one computes it
  // in place (a splat) instead of reading a buffer (FuncEmitter::plan).
  std::unordered_map<const ir::Value *, const ir::Eqn *> splatConstants_;
  std::unordered_set<const ir::Value *> renamed_;  // inputs of a reshape / pbroadcast (another name for their bytes)
  std::unordered_set<const ir::Value *> donated_;  // whose bytes an InPlace value took
  std::vector<llvm::Value *> scratch_;             // heap scratch, freed before returning
  // The blocks arena: values in the blocks form have their sizes only at run time (the devices
  // a rank runs), so their buffers are slots, each as big as the largest value it holds, that
  // values alive at different times share (first free slot, in definition order, as the
  // arena's offsets are given); on entry the call asks each slot's values' bytes, lays the
  // slots one after another and makes one allocation (emitBlocksArena, once the function is
  // emitted, into the block blocksSetup_).
  struct BlocksSlot {
    llvm::AllocaInst *offset = nullptr;      // its offset in the arena, stored on entry
    std::vector<const ir::Value *> holds;    // the values (layouts) it holds, one after another
    int64_t oneProcessBytes = 0;             // its bytes where one process runs every device
    bool free = false;
    bool group = false;  // it holds values a pipeline group keeps (groupOwner), not blocks
  };
  std::vector<BlocksSlot> blocksSlots_;
  llvm::BasicBlock *blocksSetup_ = nullptr;
  llvm::AllocaInst *blocksBase_ = nullptr;  // the arena's pointer, stored on entry
  std::vector<std::pair<const ir::Value *, size_t>> ownedBlocks_;  // live blocks-form buffers' slots
  std::vector<size_t> eqnBlocks_;                                 // ... and scratch's
  std::unordered_map<const ir::Value *, size_t> blocksLastUse_;    // by buffer (root value)
};

// The runtime's partition-spec encoding (shmap_runtime.h): per dimension, the number of axes,
// then the axes.
std::vector<int32_t> encodeSpec(const ir::PartitionSpec &spec, int64_t rank);

// A constant (a literal, or a value of a constant array) as a saturated i64 (NaN: 0), and as
// the bits of an f16 (correctly rounded from the double, as numpy's astype of a Python
// float) or bf16 (via f32, as ml_dtypes).
int64_t saturateToI64(double x);
uint16_t halfConstant(ir::DType t, double x);

// f16 / bf16 (ir::isHalf) bit patterns <-> f32, with integer operations only (as
// runtime/abi/half.h: round to nearest even, overflow to inf, NaN kept, f16 subnormals), so no
// compiler-rt conversion routine is needed and the loops vectorize.
llvm::Value *halfToF32(llvm::IRBuilder<> &b, llvm::Value *bits, ir::DType t);
llvm::Value *f32ToHalf(llvm::IRBuilder<> &b, llvm::Value *f, ir::DType t);

// What a primitive's scalar rule sees (compiler/prims/): one element of each operand inside
// a fused element-wise loop. Elements are of ModuleEmitter::computeType: an f16 / bf16 element
// is its f32 value, and fp is set; the loop rounds every f16 / bf16 result to its type, so
// a rule computes in f32 and need not round.
struct ScalarCtx {
  FuncEmitter &fe;
  llvm::IRBuilder<> &b;
  const ir::Eqn &e;
  const std::vector<llvm::Value *> &x;
  ir::DType t;    // the operands' dtype (select: the data operands'); f16 / bf16 computed as f32
  ir::DType out;  // the result's dtype
  bool fp, isBool;

  llvm::Value *error(const std::string &why);  // fails the function; null
  // An element converted between dtypes (saturating float -> int; != 0 -> bool). To f16 /
  // bf16: the value converted to f32 (the loop then rounds it), as XLA converts via f32.
  llvm::Value *convert(llvm::Value *v, ir::DType from, ir::DType to);
};

} // namespace shmapc::codegen
