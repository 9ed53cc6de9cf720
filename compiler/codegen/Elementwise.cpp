// Element-wise primitives as loops in LLVM IR, fused: a group of consecutive element-wise
// eqns of one shape (FuncEmitter::plan) becomes a single counted loop, in a function of its
// own whose buffer parameters are noalias. Values used only inside the group stay in
// registers; the rest are stored to their buffers. The loop is the simple shape LLVM's loop
// vectorizer wants (i64 induction over [lo, hi), one load per input, one store per output),
// and it needs no runtime overlap checks. Large loops are split across idle cores by the
// runtime (shm_parallel_for). Each element is computed by its primitive's `scalar` rule
// (compiler/prims/).
#include "codegen/CodegenContext.h"
#include "rules/Rules.h"

#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <unordered_set>

namespace shmapc::codegen {

using P = ir::Prim;

// How a fused loop reads the operand of a broadcast_in_dim at flat output index i: the one
// element (a scalar), i % size (the operand fills the trailing dimensions: a bias [n] added to
// [m, n]) or i / (out size / size) (it fills the leading ones); None: not fusible.
enum class BroadcastRead { None, Scalar, Trailing, Leading };

static BroadcastRead broadcastRead(const ir::Eqn &e) {
  const ir::Type &in = e.ins[0]->type, &out = e.outs[0]->type;
  if (in.numElements() == 1) return BroadcastRead::Scalar;
  // The output dimensions the operand's non-1 dimensions fill, in order (a dimension of size
  // 1 repeats along its output dimension and does not move the operand's index).
  const std::vector<int64_t> &bd = e.intsParam("broadcast_dimensions");
  std::vector<int64_t> filled;
  for (size_t d = 0; d < bd.size(); ++d) {
    if (in.shape[d] == 1) continue;
    if (in.shape[d] != out.shape[bd[d]]) return BroadcastRead::None;
    filled.push_back(bd[d]);
  }
  int64_t k = (int64_t)filled.size(), R = out.rank();
  bool trailing = true, leading = true;
  for (int64_t j = 0; j < k; ++j) {
    trailing = trailing && filled[j] == R - k + j;
    leading = leading && filled[j] == j;
  }
  return trailing ? BroadcastRead::Trailing : leading ? BroadcastRead::Leading : BroadcastRead::None;
}

// Whether `e` concatenates along its leading axis (every dimension before the concatenated
// one has size 1): then each operand is one run of the result's elements, and a fused loop
// over the result reads operand k, unchanged, over the range of k's run (concatenatedRuns),
// instead of the result being copied together first.
static bool concatenatesRuns(const ir::Eqn &e) {
  if (e.prim != P::Concatenate) return false;
  const ir::Type &out = e.outs[0]->type;
  const int64_t axis = e.intParam("dimension");
  for (int64_t d = 0; d < axis; ++d)
    if (out.shape[(size_t)d] != 1) return false;
  return out.numElements() > 1;
}

// Each operand's run of a leading-axis concatenation's elements: [start, start + size).
static std::vector<std::pair<int64_t, int64_t>> concatenatedRuns(const ir::Eqn &e) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  int64_t start = 0;
  for (const ir::Value *v : e.ins) {
    runs.push_back({start, v->type.numElements()});
    start += v->type.numElements();
  }
  return runs;
}

// Whether an eqn can be computed inside a fused element-wise loop: it has a scalar rule, a
// constant is one value repeated per element, a broadcast reads its operand at an index
// computed from the loop's (broadcastRead), and so does a transpose (a strided gather, which
// AVX-512 vectorizes); a leading-axis concatenation is read from one operand per range of the
// loop (concatenatesRuns). FuncEmitter::fusionGroups leaves a transpose or concatenation that
// no eqn of its group consumes to the runtime's kernel.
bool FuncEmitter::isFusible(const ir::Eqn &e) {
  if (e.prim == P::Concatenate) return concatenatesRuns(e);
  if (!rules::rulesOf(e.prim).scalar) return false;
  if (e.prim == P::Constant) return e.doublesParam("value").size() == 1;
  if (e.prim == P::BroadcastInDim) return broadcastRead(e) != BroadcastRead::None;
  return true;
}

// Whether a fused loop reads each operand of `e` at its own index (not a broadcast's, a
// transpose's or a concatenation's): what writing over an operand in place needs.
bool FuncEmitter::readsAtOwnIndex(const ir::Eqn &e) {
  return e.prim != P::BroadcastInDim && e.prim != P::Transpose && e.prim != P::Concatenate;
}

llvm::Value *ScalarCtx::error(const std::string &why) {
  fe.fail(std::string(ir::primName(e.prim)) + ": " + why);
  return nullptr;
}

// ---- f16 / bf16 <-> f32 (the algorithms of runtime/abi/half.h, on i32 lanes)

llvm::Value *halfToF32(llvm::IRBuilder<> &b, llvm::Value *bits, ir::DType t) {
  llvm::Type *i32 = b.getInt32Ty();
  llvm::Value *h = b.CreateZExt(bits, i32);
  auto c = [&](uint32_t v) { return b.getInt32(v); };
  if (t == ir::DType::BF16) return b.CreateBitCast(b.CreateShl(h, c(16)), b.getFloatTy());
  llvm::Value *sign = b.CreateShl(b.CreateAnd(h, c(0x8000)), c(16));
  llvm::Value *exp = b.CreateAnd(b.CreateLShr(h, c(10)), c(0x1f));
  llvm::Value *man = b.CreateAnd(h, c(0x3ff));
  llvm::Value *manBits = b.CreateShl(man, c(13));
  // normal: rebias 15 -> 127; inf / NaN: all exponent bits; zero / subnormal: man * 2^-24
  llvm::Value *normal = b.CreateOr(b.CreateShl(b.CreateAdd(exp, c(112)), c(23)), manBits);
  llvm::Value *special = b.CreateOr(c(0x7f800000), manBits);
  llvm::Value *sub = b.CreateBitCast(
      b.CreateFMul(b.CreateUIToFP(man, b.getFloatTy()), llvm::ConstantFP::get(b.getFloatTy(), 0x1p-24)), i32);
  llvm::Value *mag = b.CreateSelect(b.CreateICmpEQ(exp, c(0)), sub,
                                    b.CreateSelect(b.CreateICmpEQ(exp, c(0x1f)), special, normal));
  return b.CreateBitCast(b.CreateOr(sign, mag), b.getFloatTy());
}

llvm::Value *f32ToHalf(llvm::IRBuilder<> &b, llvm::Value *f, ir::DType t) {
  llvm::Type *i16 = b.getInt16Ty();
  auto c = [&](uint32_t v) { return b.getInt32(v); };
  llvm::Value *u = b.CreateBitCast(f, b.getInt32Ty());
  llvm::Value *signHalf = b.CreateAnd(b.CreateLShr(u, c(16)), c(0x8000));
  llvm::Value *a = b.CreateAnd(u, c(0x7fffffff));
  llvm::Value *isNan = b.CreateICmpUGT(a, c(0x7f800000));
  if (t == ir::DType::BF16) {
    llvm::Value *odd = b.CreateAnd(b.CreateLShr(u, c(16)), c(1));
    llvm::Value *r = b.CreateLShr(b.CreateAdd(b.CreateAdd(u, c(0x7fff)), odd), c(16));
    return b.CreateTrunc(b.CreateSelect(isNan, b.CreateOr(signHalf, c(0x7fc0)), r), i16);
  }
  // normal f16 (a >= 2^-14): rebias 127 -> 15, round the 13 dropped bits to nearest even
  llvm::Value *r = b.CreateSub(a, c(0x38000000));
  r = b.CreateAdd(b.CreateAdd(r, c(0xfff)), b.CreateAnd(b.CreateLShr(r, c(13)), c(1)));
  llvm::Value *normal = b.CreateLShr(r, c(13));
  // subnormal (a < 2^-14): the 24-bit significand shifted right by 126 - e, to nearest even
  // (the shift clamped to [1, 24] so it is defined in the lanes that do not use it)
  llvm::Value *e = b.CreateLShr(a, c(23));
  llvm::Value *shift = b.CreateSub(c(126), e);
  shift = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax,
                                  b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, shift, c(24)), c(1));
  llvm::Value *m = b.CreateOr(b.CreateAnd(a, c(0x7fffff)), c(0x800000));
  llvm::Value *q = b.CreateLShr(m, shift);
  llvm::Value *rem = b.CreateAnd(m, b.CreateSub(b.CreateShl(c(1), shift), c(1)));
  llvm::Value *halfUlp = b.CreateShl(c(1), b.CreateSub(shift, c(1)));
  llvm::Value *up = b.CreateOr(b.CreateICmpUGT(rem, halfUlp),
                               b.CreateAnd(b.CreateICmpEQ(rem, halfUlp), b.CreateICmpNE(b.CreateAnd(q, c(1)), c(0))));
  llvm::Value *sub = b.CreateAdd(q, b.CreateZExt(up, b.getInt32Ty()));
  sub = b.CreateSelect(b.CreateICmpULT(e, c(102)), c(0), sub);  // below 2^-25: 0
  llvm::Value *mag = b.CreateSelect(
      isNan, c(0x7e00),
      b.CreateSelect(b.CreateICmpUGE(a, c(0x477ff000)), c(0x7c00),  // >= 65520: inf
                     b.CreateSelect(b.CreateICmpUGE(a, c(0x38800000)), normal, sub)));
  return b.CreateTrunc(b.CreateOr(signHalf, mag), i16);
}

llvm::Value *ScalarCtx::convert(llvm::Value *v, ir::DType from, ir::DType to) {
  // f16 / bf16 elements are f32 values: from them, convert as from f32; to them, convert to
  // f32 (the loop rounds the result to the half type).
  if (ir::isHalf(from)) from = ir::DType::F32;
  if (ir::isHalf(to)) to = ir::DType::F32;
  if (from == to) return v;
  llvm::Type *dst = fe.me.elemType(to);
  bool fromFp = ir::isFloat(from), toFp = ir::isFloat(to);
  if (to == ir::DType::Bool) {  // != 0 (NaN counts as true, as in C)
    llvm::Value *nz = fromFp ? b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
                             : b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    return b.CreateZExt(nz, dst);
  }
  if (fromFp && toFp) return b.CreateFPCast(v, dst);
  if (fromFp)  // saturating: out-of-range values clamp and NaN gives 0, never poison
    return b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {dst, v->getType()}, {v});
  if (from == ir::DType::Bool) return toFp ? b.CreateUIToFP(v, dst) : b.CreateZExt(v, dst);
  return toFp ? b.CreateSIToFP(v, dst) : b.CreateSExtOrTrunc(v, dst);
}

// Groups of at least this many elements may be split across idle cores (shm_parallel_for:
// on the host, whose pool threads are idle between shmap calls); below it the hand-off
// (tens of microseconds) would cost more than it saves.
constexpr int64_t kParallelMinElements = 1 << 16;

// A fused loop inlines its math functions (exp, sin, ...: codegen/Math.h) up to this many
// calls; beyond, it calls them (with their vector variants), as each inlined copy is ~50-100
// instructions for the optimizer and the vectorizer to work through. The bits are the same.
constexpr int kInlineMathCalls = 16;
constexpr int64_t kInterleaveMinElements = 1024;
constexpr size_t kLoopBufferParams = 8;  // a fused loop with at most this many buffers takes each as a parameter
constexpr int kMathInterleave = 8;  // vectors in flight in a loop that calls math (below)

// The vector width of a loop that calls math: the widest the CPU has. Where LLVM prefers 256-bit
// vectors on an AVX-512 CPU (Intel's, from Skylake-SP to Sapphire Rapids), it does so for code
// that mixes a few wide operations into scalar work, where a core slowed down for 512-bit
// vectors would cost more than they gain; a math loop is wide operations throughout, some 55
// a vector for f32 tanh, and 512-bit vectors double its throughput (the icelake-server code on
// Zen 5, ns per element and tanh: 0.53 at 256 bits, 0.28 at 512).
static unsigned mathVectorBits(const Target &t) {
  if (t.has("avx512f") && t.has("evex512")) return 512;
  return t.has("avx") ? 256 : 128;
}

// The vectors in flight in a math loop of rows of `row` elements (0: a flat loop) whose lanes
// are `lanes` wide: kMathInterleave, fewer where a row holds fewer vectors (a softmax's rows of
// 64 at 16 lanes: 4), since the vectorized loop handles only whole groups of vectors, and a row
// shorter than a group runs scalar (that softmax's exp: 0.40 s at 8, 0.29 s at 4).
static int mathInterleave(int64_t row, int64_t lanes) {
  int count = kMathInterleave;
  while (row > 0 && count > 1 && count * lanes > row) count /= 2;
  return count;
}

static bool isMathFunction(ir::Prim p) {
  return p == ir::Prim::Exp || p == ir::Prim::Log || p == ir::Prim::Sin || p == ir::Prim::Cos ||
         p == ir::Prim::Tanh || p == ir::Prim::Pow;
}

bool FuncEmitter::emitElementwiseGroup(size_t first, size_t last) {
  // The loop runs over the group's shape; its one-element values (FuncEmitter::plan) are the
  // same in every iteration, read and written at element 0.
  int64_t n = 0;
  for (size_t i = first; i <= last; ++i) n = std::max(n, f.eqns[i].outs[0]->type.numElements());
  if (n == 0) return true;

  // The values whose buffers the loop touches (inputs read, outputs written); a
  // concatenation's operands are read through a pointer of their own (concatSource below).
  std::vector<const ir::Value *> touched;
  std::unordered_map<const ir::Value *, bool> inGroup, written;
  size_t numStored = 0;
  const ir::Eqn *concat = nullptr;
  for (size_t i = first; i <= last; ++i) {
    if (f.eqns[i].prim == P::Concatenate) concat = &f.eqns[i];
    for (const ir::Value *v : f.eqns[i].ins)
      if (!inGroup.count(v) && !recomputedInLoops(v) && concat != &f.eqns[i]) touched.push_back(v);
    for (const ir::Value *v : f.eqns[i].outs) {
      inGroup[v] = true;
      if (storedByGroup(v)) touched.push_back(v), written[root(v)] = true, ++numStored;
    }
  }
  if (numStored == 0) return true;  // e.g. only dead values, or a pbroadcast alias
  int mathCalls = 0;
  for (size_t i = first; i <= last; ++i) mathCalls += isMathFunction(f.eqns[i].prim);
  me.inlineMath = mathCalls <= kInlineMathCalls;
  if (n == 1) {  // straight-line code in place: nothing to vectorize
    auto same = [&](const ir::Value *v) { return buffer(v); };
    return emitGroupBody(first, last, b, same, i64(0), 1);
  }

  // The loop is a function of its own, void (i64 lo, i64 hi, ptr arena, ptr buffers...), kept
  // out of line, whose pointer parameters are noalias: the arena, through which the loop reads
  // its inputs that live there (at constant offsets), and each other buffer once: the values
  // it writes, parameters, results, stack values. That tells the vectorizer that the buffers
  // are disjoint (values live at once never share bytes; callers never pass an input buffer
  // as an output) at a cost linear in their number, where alias-scope metadata on every
  // access (or inlining, which turns the parameters into such metadata) grows with its
  // square; and since no two written buffers share a parameter, it has no pairs of accesses
  // to check against each other. Reads need no such care, and a loop of many buffers keeps one
  // register for all of them. A loop of few buffers takes each as a parameter of its own, reads
  // too: loops doing the same thing to other buffers (a model's layers) are then the same
  // function, which LLVM's MergeFunctions (Target.cpp) keeps once.
  auto arenaRead = [&](const ir::Value *v) {  // (in place: a parameter)
    return !written.count(root(v)) && storage(root(v)).kind == StorageKind::Heap;
  };
  auto offsetInArena = [&](const ir::Value *v) {
    return arenaOffset_.at(root(v)) + (storage(v).kind == StorageKind::Alias ? storage(v).offset : 0);
  };
  std::set<int64_t> readOffsets;
  std::unordered_set<llvm::Value *> otherBuffers;
  for (const ir::Value *v : touched)
    if (arenaRead(v))
      readOffsets.insert(offsetInArena(v));
    else
      otherBuffers.insert(buffer(v));
  const bool readsViaArena = readOffsets.size() + otherBuffers.size() > kLoopBufferParams;
  auto viaArena = [&](const ir::Value *v) { return readsViaArena && arenaRead(v); };
  std::map<int64_t, llvm::Value *> readPointer;  // an arena read's own argument, by offset
  auto argument = [&](const ir::Value *v) {
    if (!arenaRead(v)) return buffer(v);
    llvm::Value *&p = readPointer[offsetInArena(v)];
    if (!p) p = b.CreateConstInBoundsGEP1_64(me.i8Ty, arena_, (uint64_t)offsetInArena(v));
    return p;
  };
  std::vector<llvm::Value *> bufs;                     // the pointer arguments, in order
  std::unordered_map<llvm::Value *, unsigned> paramOf;  // their parameter numbers
  if (std::any_of(touched.begin(), touched.end(), viaArena)) bufs.push_back(arena_);
  for (const ir::Value *v : touched)
    if (!viaArena(v) && paramOf.emplace(argument(v), (unsigned)bufs.size() + 2).second) bufs.push_back(argument(v));
  llvm::LLVMContext &ctx = me.ctx;
  std::vector<llvm::Type *> params = {me.i64Ty, me.i64Ty};
  params.insert(params.end(), bufs.size() + (concat ? 1 : 0), me.ptrTy);
  llvm::Function *loopFn = llvm::Function::Create(llvm::FunctionType::get(me.voidTy, params, false),
                                                  llvm::Function::InternalLinkage, fn->getName() + ".loop", me.mod);
  loopFn->addFnAttr(llvm::Attribute::NoInline);
  loopFn->addFnAttr(llvm::Attribute::NoUnwind);
  for (size_t k = 0; k < params.size() - 2; ++k) {
    loopFn->addParamAttr((unsigned)k + 2, llvm::Attribute::NoAlias);
    loopFn->addParamAttr((unsigned)k + 2, llvm::Attribute::NoCapture);
  }
  llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx, "entry", loopFn);
  llvm::BasicBlock *loop = llvm::BasicBlock::Create(ctx, "ew.loop", loopFn);
  llvm::BasicBlock *exit = llvm::BasicBlock::Create(ctx, "ew.exit", loopFn);
  llvm::IRBuilder<> lb(entry);
  std::unordered_map<const ir::Value *, llvm::Value *> pointer;  // in the loop function
  for (const ir::Value *v : touched) {
    if (viaArena(v))
      pointer[v] = lb.CreateConstInBoundsGEP1_64(me.i8Ty, loopFn->getArg(2), (uint64_t)offsetInArena(v));
    else
      pointer[v] = loopFn->getArg(paramOf.at(argument(v)));
  }
  llvm::Value *lo = loopFn->getArg(0), *hi = loopFn->getArg(1);
  // With broadcast operands the loop runs row by row (groupRowLength): an outer loop over the
  // rows of [lo, hi), an inner one over a row's elements, in which every operand is read at
  // the index plus a per-row offset (a trailing broadcast) or at one per-row element (a
  // leading one). A flat loop would read a bias at i % n, which the vectorizer can only
  // version on "no wrap within this call" and runs scalar for any call longer than a row.
  const int64_t row = groupRowLength(first, last, n);
  llvm::BasicBlock *rowHead = row ? llvm::BasicBlock::Create(ctx, "ew.row", loopFn, loop) : nullptr;
  llvm::Value *rowStart = nullptr, *rowEnd = hi;
  llvm::PHINode *rowPhi = nullptr;
  lb.CreateCondBr(lb.CreateICmpSLT(lo, hi), row ? rowHead : loop, exit);
  if (row) {
    lb.SetInsertPoint(rowHead);
    rowPhi = lb.CreatePHI(me.i64Ty, 2, "row.i");
    rowPhi->addIncoming(lo, entry);
    rowStart = lb.CreateSub(rowPhi, lb.CreateURem(rowPhi, i64(row)), "row.start", true, true);
    llvm::Value *end = lb.CreateAdd(rowStart, i64(row), "row.end", true, true);
    rowEnd = lb.CreateSelect(lb.CreateICmpSLT(end, hi), end, hi);
    lb.CreateBr(loop);
  }
  lb.SetInsertPoint(loop);
  llvm::PHINode *phi = lb.CreatePHI(me.i64Ty, 2, "i");
  phi->addIncoming(row ? (llvm::Value *)rowPhi : lo, row ? rowHead : entry);
  auto param = [&](const ir::Value *v) { return pointer.at(v); };
  const size_t mathCallsBefore = me.mathCalls;
  // (a concatenation's source: the operand whose run [lo, hi) is in, as a pointer to where the
  // result's element 0 would lie, so that element i of the result is its element i)
  llvm::Value *concatSource = concat ? loopFn->getArg((unsigned)bufs.size() + 2) : nullptr;
  if (!emitGroupBody(first, last, lb, param, phi, n, rowStart, concatSource)) return false;
  const bool callsMath = me.mathCalls != mathCallsBefore;
  llvm::Value *next = lb.CreateAdd(phi, i64(1), "i.next", /*HasNUW=*/true, /*HasNSW=*/true);
  phi->addIncoming(next, lb.GetInsertBlock());
  llvm::BranchInst *latch;
  if (row) {
    llvm::BasicBlock *rowLatch = llvm::BasicBlock::Create(ctx, "ew.row.next", loopFn, exit);
    latch = lb.CreateCondBr(lb.CreateICmpSLT(next, rowEnd), loop, rowLatch);
    lb.SetInsertPoint(rowLatch);
    rowPhi->addIncoming(rowEnd, rowLatch);
    lb.CreateCondBr(lb.CreateICmpSLT(rowEnd, hi), rowHead, exit);
  } else {
    latch = lb.CreateCondBr(lb.CreateICmpSLT(next, hi), loop, exit);
  }
  // Math functions make long dependency chains (tanh: ~75 cycles from x to the result), and a
  // body of several in a row is longer than the core's reorder window, so only the vectors
  // interleaved within one iteration overlap: 8 keep a core's adders and multipliers busy (on
  // Zen 5, ns per element and tanh: a 10-stage chain at 16 lanes 0.39 at 4, 0.28 at 8; at 8
  // lanes, icelake-server's code, 0.76 at 4, 0.53 at 8; 16 tanh in a 144-equation body 0.76 at
  // 2, 0.39 at 8). The copies cost little compile time (that body: 0.27 s at 2, 0.42 s at 8).
  // Not on short loops, which gain nothing, and where LLVM 19's vectorizer does not finish on
  // some f16 loops for AVX2 targets when interleaving is forced (a 4-element loop of
  // tests/run/grad_dtypes.smp).
  if (callsMath) {
    const unsigned bits = mathVectorBits(me.target);
    if (bits == 512) loopFn->addFnAttr("prefer-vector-width", "512");
    // (the narrowest float the loop holds, f16 and bf16 computed in f32: the most lanes the
    // vectorizer can choose)
    int64_t elementBits = 64;
    for (size_t i = first; i <= last; ++i)
      for (const ir::Value *v : f.eqns[i].outs)
        if (ir::isFloat(v->type.dtype))
          elementBits = std::min<int64_t>(elementBits, std::max<int64_t>(32, 8 * ir::dtypeSize(v->type.dtype)));
    if (n >= kInterleaveMinElements) interleave(latch, mathInterleave(row, bits / elementBits));
  }
  lb.SetInsertPoint(exit);
  lb.CreateRetVoid();

  // The calls: one over [0, n), or with a concatenation one over each operand's run; each
  // directly, or through the runtime when it is large enough to split.
  std::vector<std::pair<int64_t, int64_t>> runs = {{0, n}};  // (start, size)
  if (concat) runs = concatenatedRuns(*concat);
  llvm::Function *task = nullptr;
  for (size_t k = 0; k < runs.size(); ++k) {
    const auto [start, size] = runs[k];
    if (size == 0) continue;
    std::vector<llvm::Value *> ptrs = bufs;
    if (concat) {  // (not inbounds: the operand's pointer less `start` elements lies before it)
      const int64_t es = ir::dtypeSize(concat->outs[0]->type.dtype);
      ptrs.push_back(b.CreateGEP(me.i8Ty, buffer(concat->ins[k]), i64(-start * es)));
    }
    if (size < kParallelMinElements) {
      std::vector<llvm::Value *> args = {i64(start), i64(start + size)};
      args.insert(args.end(), ptrs.begin(), ptrs.end());
      b.CreateCall(loopFn, args);
      continue;
    }
    // task(ptr args, i64 lo, i64 hi) unpacks the pointer array for the loop function, and
    // offsets the range by the run's start, which follows the pointers.
    if (!task) {
      task = llvm::Function::Create(llvm::FunctionType::get(me.voidTy, {me.ptrTy, me.i64Ty, me.i64Ty}, false),
                                    llvm::Function::InternalLinkage, fn->getName() + ".task", me.mod);
      task->addFnAttr(llvm::Attribute::NoUnwind);
      llvm::IRBuilder<> tb(llvm::BasicBlock::Create(ctx, "entry", task));
      llvm::Value *offset = concat ? tb.CreatePtrToInt(tb.CreateLoad(me.ptrTy, tb.CreateConstGEP1_64(
                                                           me.ptrTy, task->getArg(0), ptrs.size())),
                                                       me.i64Ty)
                                   : nullptr;
      std::vector<llvm::Value *> args = {task->getArg(1), task->getArg(2)};
      if (offset) args = {tb.CreateAdd(args[0], offset), tb.CreateAdd(args[1], offset)};
      for (size_t j = 0; j < ptrs.size(); ++j)
        args.push_back(tb.CreateLoad(me.ptrTy, tb.CreateConstGEP1_64(me.ptrTy, task->getArg(0), j)));
      tb.CreateCall(loopFn, args);
      tb.CreateRetVoid();
    }
    if (concat) ptrs.push_back(b.CreateIntToPtr(i64(start), me.ptrTy));
    callRt("shm_parallel_for", {task, ptrArray(ptrs), i64(size)});
  }
  return true;
}

// The row length of a fused loop over n elements that reads broadcast operands: the largest
// length dividing every trailing operand's size and every leading operand's repeat count (so
// that within a row the first reads consecutive elements and the second one element), or 0
// (a flat loop) where there is no broadcast or the rows would be too short to vectorize.
int64_t FuncEmitter::groupRowLength(size_t first, size_t last, int64_t n) const {
  constexpr int64_t kMinRow = 16;
  int64_t row = 0;
  for (size_t i = first; i <= last; ++i) {
    const ir::Eqn &e = f.eqns[i];
    if (e.prim != P::BroadcastInDim) continue;
    int64_t size = e.ins[0]->type.numElements();
    switch (broadcastRead(e)) {
    case BroadcastRead::Trailing: row = std::gcd(row, size); break;
    case BroadcastRead::Leading: row = std::gcd(row, n / size); break;
    default: break;
    }
  }
  return row >= kMinRow && row < n ? row : 0;
}

// Outputs stored by a fused loop: not Fused (registers only) nor Alias (a pbroadcast whose
// input buffer already holds the bytes).
bool FuncEmitter::storedByGroup(const ir::Value *v) const {
  StorageKind k = storage(v).kind;
  return k != StorageKind::Fused && k != StorageKind::Alias && k != StorageKind::Blocks;  // (Blocks: a splat, filled)
}

// The eqns first..last computed for element `idx` of n, with builder `lb`; bufferOf(v) is the
// pointer to v's buffer where `lb` inserts.
bool FuncEmitter::emitGroupBody(size_t first, size_t last, llvm::IRBuilder<> &lb,
                                const std::function<llvm::Value *(const ir::Value *)> &bufferOf, llvm::Value *idx,
                                int64_t n, llvm::Value *rowStart, llvm::Value *concatSource) {
  std::unordered_map<const ir::Value *, llvm::Value *> elem;  // this iteration's elements
  // `v`'s element for this iteration; `at` overrides the index (a broadcast's operand).
  // A broadcast's operand is not cached: two broadcasts of one array (a[:, None] * a[None, :])
  // read it at different indices.
  auto load = [&](const ir::Value *v, llvm::Value *at) -> llvm::Value * {
    if (v->type.numElements() == 1) at = nullptr;
    auto it = elem.find(v);
    if (it != elem.end() && (!at || splatConstants_.count(v))) return it->second;  // (a splat: any index)
    llvm::Type *t = me.elemType(v->type.dtype);
    if (v->type.numElements() == 1) at = i64(0);
    llvm::Value *ld = lb.CreateLoad(t, lb.CreateInBoundsGEP(t, bufferOf(v), at ? at : idx));
    llvm::Value *x = ir::isHalf(v->type.dtype) ? halfToF32(lb, ld, v->type.dtype) : ld;
    if (!at || v->type.numElements() == 1) elem[v] = x;
    return x;
  };

  // One eqn's element from its operands' elements `x`: its scalar rule, an f16 / bf16 result
  // rounded to its type (JAX on CPU rounds every operation's result, also inside a fusion);
  // `bits`, when set, is what is stored.
  auto compute = [&](const ir::Eqn &e, const std::vector<llvm::Value *> &x, llvm::Value *&bits) -> llvm::Value * {
    ir::DType outType = e.outs[0]->type.dtype;
    ir::DType t = e.ins.empty() ? outType : e.ins.back()->type.dtype;  // select: the data operands
    ScalarCtx c{*this, lb, e, x, t, outType, ir::isFloat(t), t == ir::DType::Bool};
    llvm::Value *r = rules::rulesOf(e.prim).scalar(c);
    bits = nullptr;
    if (r && ir::isHalf(outType)) {
      bits = f32ToHalf(lb, r, outType);
      r = halfToF32(lb, bits, outType);
    }
    return r;
  };
  for (size_t i = first; i <= last; ++i) {
    const ir::Eqn &e = f.eqns[i];
    if (e.prim == P::Concatenate) {  // element idx through the source of the call's run
      const ir::Value *out = e.outs[0];
      llvm::Type *t = me.elemType(out->type.dtype);
      llvm::Value *bits = lb.CreateLoad(t, lb.CreateGEP(t, concatSource, idx));
      elem[out] = ir::isHalf(out->type.dtype) ? halfToF32(lb, bits, out->type.dtype) : bits;
      if (storedByGroup(out)) lb.CreateStore(bits, lb.CreateInBoundsGEP(t, bufferOf(out), idx));
      continue;
    }
    // splat constants of other loops, recomputed here (FuncEmitter::plan)
    for (const ir::Value *v : e.ins)
      if (!elem.count(v) && recomputedInLoops(v)) {
        llvm::Value *bits;
        if (!(elem[v] = compute(*splatConstants_.at(v), {}, bits))) return false;
      }
    std::vector<llvm::Value *> x;
    llvm::Value *at = nullptr;  // a broadcast's operand index
    if (e.prim == P::Transpose) {
      // output coordinates from the flat index, minor first; each strides the operand by
      // the size of the dimensions after the one it comes from
      const std::vector<int64_t> &perm = e.intsParam("permutation");
      const std::vector<int64_t> &inShape = e.ins[0]->type.shape, &outShape = e.outs[0]->type.shape;
      std::vector<int64_t> inStride(inShape.size(), 1);
      for (size_t d = inShape.size(); d-- > 1;) inStride[d - 1] = inStride[d] * inShape[d];
      llvm::Value *rest = idx;
      at = i64(0);
      for (size_t d = outShape.size(); d-- > 0;) {
        llvm::Value *coord = d > 0 ? lb.CreateURem(rest, i64(outShape[d])) : rest;
        if (d > 0) rest = lb.CreateUDiv(rest, i64(outShape[d]));
        at = lb.CreateAdd(at, lb.CreateMul(coord, i64(inStride[(size_t)perm[d]])));
      }
    }
    if (e.prim == P::BroadcastInDim) {
      int64_t size = e.ins[0]->type.numElements();
      // In a row loop (groupRowLength divides both the operand's size for a trailing read and
      // the repeat count for a leading one), the row's start fixes the wrap and the quotient.
      switch (broadcastRead(e)) {
      case BroadcastRead::Trailing:
        at = rowStart ? lb.CreateAdd(lb.CreateSub(idx, rowStart, "", true, true), lb.CreateURem(rowStart, i64(size)),
                                     "", true, true)
                      : lb.CreateURem(idx, i64(size));
        break;
      case BroadcastRead::Leading: at = lb.CreateUDiv(rowStart ? rowStart : idx, i64(n / size)); break;
      default: at = i64(0); break;
      }
    }
    for (const ir::Value *v : e.ins) x.push_back(load(v, at));
    llvm::Value *bits;
    llvm::Value *r = compute(e, x, bits);
    if (!r) return false;
    const ir::Value *out = e.outs[0];
    elem[out] = r;
    if (storedByGroup(out)) {  // a one-element value read after the group: element 0
      llvm::Type *t = me.elemType(out->type.dtype);
      llvm::Value *at = out->type.numElements() == 1 ? i64(0) : idx;
      lb.CreateStore(bits ? bits : r, lb.CreateInBoundsGEP(t, bufferOf(out), at));
    }
  }
  return true;
}

// A vector math routine takes tens of cycles, and a chain of them in one loop (y = tanh(y *
// 1.1 + 0.1) ten times) is a chain of dependent calls on one vector: interleaving `count`
// vectors per iteration gives the core independent calls to overlap (a 10-stage tanh chain:
// 0.52 ns per element at one, 0.30 at 4, 0.21 at 8). LLVM's own heuristic keeps such loops
// at one.
void FuncEmitter::interleave(llvm::BranchInst *latch, int count) {
  llvm::LLVMContext &ctx = me.ctx;
  llvm::Metadata *ops[] = {nullptr, llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.interleave.count"),
                                                            llvm::ConstantAsMetadata::get(b.getInt32(count))})};
  llvm::MDNode *loopId = llvm::MDNode::getDistinct(ctx, ops);
  loopId->replaceOperandWith(0, loopId);
  latch->setMetadata(llvm::LLVMContext::MD_loop, loopId);
}

} // namespace shmapc::codegen
