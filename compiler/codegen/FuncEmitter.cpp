// One IR Func -> one LLVM function void(ptr dev, ptr outs, ptr ins): decides where every
// value's buffer lives (the storage plan), then lowers the equations in order. The values too
// big for the stack share one block per call, the arena: each has an offset in it for the
// span of eqns from its definition to its last use, and values whose spans do not overlap may
// share bytes, so the arena's size follows the program's live values (as freeing each buffer
// after its last use would) at the cost of one allocation per call.
#include "codegen/CodegenContext.h"
#include "source/WorkCount.h"

#include <llvm/IR/Constants.h>

#include <algorithm>
#include <map>
#include <queue>

namespace shmapc::codegen {

// Values at most this big live on the stack: scalars and tiny arrays (loop counters, sums)
// cost no allocator call, and mem2reg turns most of them into registers.
static constexpr int64_t kStackBytes = 64;

// A fusion group holds at most this many eqns: LLVM's instruction scheduler and register
// allocator take time that grows faster than linearly with a loop body's size (a chain of
// 10,000 element-wise eqns under grad was one loop of some 50,000 instructions). Longer runs
// become several loops, each storing its last values for the next: one more pass over memory
// per 256 operations, and compile time linear in the program.
static constexpr size_t kMaxGroupEqns = 256;
// ... and stores at most about this many values for later eqns (the residuals of a forward
// pass under grad): the vectorizer checks every pair of a loop's stores.
static constexpr size_t kMaxGroupStores = 32;

FuncEmitter::FuncEmitter(ModuleEmitter &me, const ir::Func &f)
    : me(me), f(f), fn(me.funcs.at(&f)), b(me.ctx), entry_(me.ctx) {}

const ir::Value *FuncEmitter::root(const ir::Value *v) const {
  auto it = storage_.find(v);
  if (it != storage_.end() && (it->second.kind == StorageKind::Alias || it->second.kind == StorageKind::InPlace))
    return it->second.aliasOf;
  return v;
}

// The last eqn reading each value (results: past the end).
std::unordered_map<const ir::Value *, size_t> FuncEmitter::lastReads(const ir::Func &f) {
  std::unordered_map<const ir::Value *, size_t> lastRead;
  for (size_t i = 0; i < f.eqns.size(); ++i)
    for (const ir::Value *v : f.eqns[i].ins) lastRead[v] = i;
  for (const ir::Value *v : f.results) lastRead[v] = f.eqns.size();
  return lastRead;
}

// Fusion groups: maximal runs of consecutive fusible eqns with one output shape. An eqn
// with a one-element result (a scalar constant, the `c * 0.001` of `y * 1.5 + c * 0.001`
// before its broadcast) joins any group: its value is the same in every iteration (LLVM
// hoists it), so chains of `y = y * a + b` fuse into one loop. Returns each eqn's group (-1:
// none); `groups` gets their eqn ranges.
std::vector<int> FuncEmitter::fusionGroups(const ir::Func &f, const std::unordered_map<const ir::Value *, size_t> &lastRead,
                                           std::vector<std::pair<size_t, size_t>> &groups) {
  std::vector<int> groupOf(f.eqns.size(), -1);
  std::vector<std::vector<int64_t>> groupShape;  // the loop's shape
  std::vector<bool> onlyUnits;                   // a group of one-element results so far
  auto isUnit = [](const ir::Eqn &e) { return e.outs[0]->type.numElements() == 1; };
  // The last reads of the current group's values, soonest first: those past eqn i are the
  // values the group stores for later eqns (splat constants are recomputed where read).
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> readLater;
  std::unordered_set<const ir::Value *> definedIn;  // by the current group
  bool groupConcats = false;                         // the current group holds a concatenation
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    const ir::Eqn &e = f.eqns[i];
    if (!isFusible(e)) continue;
    const std::vector<int64_t> &shape = e.outs[0]->type.shape;
    bool unit = isUnit(e);
    while (!readLater.empty() && readLater.top() <= i) readLater.pop();
    // (a transpose or concatenation reads its operands at other indices than the loop's: not
    // values the loop computes, whose other elements come in other iterations; and a loop
    // reads one concatenation's operands by ranges, so it holds at most one)
    const bool concat = e.prim == ir::Prim::Concatenate;
    bool readsOwnGroup = false;
    if (!groups.empty() && (e.prim == ir::Prim::Transpose || concat))
      for (const ir::Value *v : e.ins) readsOwnGroup = readsOwnGroup || definedIn.count(v);
    bool adjacent = !groups.empty() && groups.back().second + 1 == i && !readsOwnGroup &&
                    !(concat && (groupConcats || onlyUnits.back())) && i - groups.back().first < kMaxGroupEqns &&
                    readLater.size() < kMaxGroupStores;
    if (adjacent && (shape == groupShape.back() || unit || onlyUnits.back())) {
      groups.back().second = i;
      if (!unit && onlyUnits.back()) groupShape.back() = shape;
      onlyUnits.back() = onlyUnits.back() && unit;
    } else {
      groups.push_back({i, i});
      groupShape.push_back(shape);
      onlyUnits.push_back(unit);
      readLater = {};
      definedIn.clear();
      groupConcats = false;
    }
    groupConcats = groupConcats || concat;
    groupOf[i] = (int)groups.size() - 1;
    for (const ir::Value *v : e.outs) definedIn.insert(v);
    if (e.prim == ir::Prim::Constant) continue;  // (fusible: a splat)
    for (const ir::Value *v : e.outs) {
      auto it = lastRead.find(v);
      if (it != lastRead.end()) readLater.push(it->second);
    }
  }
  // A transpose is fused into the loop that consumes it (`transpose(y) * 1.5 + 0.5` over f32
  // [256, 256]: 1.32 ns an element against 1.84 with the transpose copied first; [2048, 2048]:
  // 6.2 against 6.6); alone, the runtime's kernel is quicker than a gathering loop (1.43 ns
  // against 1.66 at 256^2), so a group of nothing but transposes (and splats) is no group.
  // A concatenation is fused only into a loop that consumes it (the runtime copies one with
  // memcpy): one that no later eqn of its group reads splits the group around it.
  std::vector<std::pair<size_t, size_t>> split;
  for (auto [first, last] : groups) {
    for (size_t i = first; i <= last; ++i) {
      if (f.eqns[i].prim != ir::Prim::Concatenate) continue;
      bool consumed = false;
      for (size_t k = i + 1; k <= last && !consumed; ++k)
        for (const ir::Value *v : f.eqns[k].ins) consumed = consumed || v == f.eqns[i].outs[0];
      if (consumed) continue;
      if (i > first) split.push_back({first, i - 1});
      groupOf[i] = -1;
      first = i + 1;
    }
    if (first <= last) split.push_back({first, last});
  }
  std::vector<std::pair<size_t, size_t>> kept;
  for (const auto &[first, last] : split) {
    bool anyTranspose = false, onlyTransposes = true;
    for (size_t i = first; i <= last; ++i) {
      anyTranspose = anyTranspose || f.eqns[i].prim == ir::Prim::Transpose;
      onlyTransposes = onlyTransposes && (f.eqns[i].prim == ir::Prim::Transpose || f.eqns[i].prim == ir::Prim::Constant);
    }
    const bool lone = anyTranspose && onlyTransposes;
    for (size_t i = first; i <= last; ++i) groupOf[i] = lone ? -1 : (int)kept.size();
    if (!lone) kept.push_back({first, last});
  }
  groups = std::move(kept);
  return groupOf;
}

void FuncEmitter::plan() {
  for (size_t i = 0; i < f.params.size(); ++i)
    storage_[f.params[i]] = {StorageKind::Param, (int)i, nullptr};
  // A result computed by an eqn is written straight into the caller's buffer; a parameter
  // returned as a result, or a value returned twice, is copied at the end (emitResults).
  for (size_t i = 0; i < f.results.size(); ++i)
    if (!storage_.count(f.results[i]))
      storage_[f.results[i]] = {StorageKind::OutSlot, (int)i, nullptr};

  // A while body's carries updated in place: the result's bytes are the param's (the caller
  // passes the same buffer for both).
  auto carries = me.carriesInPlace.find(&f);
  if (carries != me.carriesInPlace.end())
    for (size_t j = 0; j < f.results.size(); ++j)
      if (carries->second[j])
        storage_[f.results[j]] = {StorageKind::InPlace, -1, f.params[f.params.size() - f.results.size() + j]};
  // A shmap body's result computed over its parameter's block (findDonatedCarries)
  auto donated = me.donatedResults.find(&f);
  if (donated != me.donatedResults.end())
    for (const auto &[k, m] : donated->second) storage_[f.results[k]] = {StorageKind::InPlace, -1, f.params[m]};

  // A result that is another name for a value (renamesOperand: a reshape or pbroadcast of it,
  // as a forward pass's residuals often are, or its sum over one device) has that value
  // computed straight into its slot, rather than computed in the arena and copied out.
  bool oneDeviceMesh = f.mesh != nullptr;
  for (size_t a = 0; f.mesh && a < f.mesh->sizes.size(); ++a) oneDeviceMesh = oneDeviceMesh && f.mesh->sizes[a] == 1;
  std::unordered_map<const ir::Value *, const ir::Eqn *> definer;
  for (const ir::Eqn &e : f.eqns)
    for (const ir::Value *v : e.outs) definer[v] = &e;
  for (size_t i = 0; i < f.results.size(); ++i) {
    const ir::Value *r = f.results[i];
    if (storage_[r].kind != StorageKind::OutSlot || storage_[r].slot != (int)i || me.sizedAtRunTime(r)) continue;
    std::vector<const ir::Value *> names = {r};
    for (auto d = definer.find(r); d != definer.end(); d = definer.find(names.back())) {
      const ir::Eqn &e = *d->second;
      // (through a sum only on a mesh of one device: elsewhere the runtime may give a device
      // no buffer for a result only a collective writes, SHM_OUT_COLLECTIVE_ONLY)
      const bool sum = e.prim == ir::Prim::Psum || e.prim == ir::Prim::Psum2;
      if (!renamesOperand(f, e) || e.prim == ir::Prim::Slice || storage_.count(e.ins[0]) || (sum && !oneDeviceMesh))
        break;
      names.push_back(e.ins[0]);
    }
    if (names.size() == 1) continue;
    storage_[names.back()] = {StorageKind::OutSlot, (int)i, nullptr};
    for (size_t k = 0; k + 1 < names.size(); ++k) storage_[names[k]] = {StorageKind::Alias, -1, names.back()};
  }

  std::unordered_map<const ir::Value *, size_t> lastRead = lastReads(f);
  std::vector<int> groupOf = fusionGroups(f, lastRead, groups_);
  renamed_ = renamedValues(f);
  for (const ir::Eqn &e : f.eqns) {
    if (e.prim == ir::Prim::Constant && isFusible(e)) splatConstants_[e.outs[0]] = &e;
    // (a splat made device-varying is the same splat: the zeros a gradient accumulates into)
    if (e.prim == ir::Prim::Pbroadcast && splatConstants_.count(e.ins[0]) && groupOf[&e - f.eqns.data()] >= 0)
      splatConstants_[e.outs[0]] = splatConstants_.at(e.ins[0]);
  }
  // A value computed in a group needs a buffer only if something outside the group reads it.
  // A splat constant read by another fused loop does not count: that loop recomputes it, so
  // the constants a forward pass shares with its backward pass (`y * 1.0001` and the
  // cotangent's `* 1.0001`) are not stored as arrays of one repeated value.
  std::unordered_map<const ir::Value *, int> definedIn;
  std::unordered_map<const ir::Value *, bool> usedOutside;
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    for (size_t k = 0; k < f.eqns[i].ins.size(); ++k) {
      const ir::Value *v = f.eqns[i].ins[k];
      auto it = definedIn.find(v);
      // (a loop's initial carry is filled with the splat: the zeros an accumulator starts from;
      // a fused concatenation reads its operands' buffers, splats too)
      const bool readsBuffer = f.eqns[i].prim == ir::Prim::Concatenate;
      bool recomputed = ((groupOf[i] >= 0 && !readsBuffer) || initialCarry(f.eqns[i], k)) && splatConstants_.count(v);
      if (it != definedIn.end() && it->second != groupOf[i] && !recomputed) usedOutside[v] = true;
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
      else if (renamesOperand(f, e) &&
               storage_[root(e.ins[0])].kind != StorageKind::Fused) {
        s = {StorageKind::Alias, -1, root(e.ins[0])};  // same bytes: share the buffer
        s.offset = storage_[e.ins[0]].kind == StorageKind::Alias ? storage_[e.ins[0]].offset : 0;
        int64_t at = 0;
        if (isContiguousSlice(e, &at)) s.offset += at;
      }
      else if (e.prim == ir::Prim::Constant && e.doublesParam("value").size() > 1)
        s.kind = StorageKind::Global;
      else if (v->type.byteSize() <= kStackBytes)
        s.kind = StorageKind::Stack;
      else if (const ir::Value *x = groupOf[i] >= 0 ? donor(i, v, groupOf, lastRead) : nullptr)
        s = {StorageKind::InPlace, -1, root(x)};  // (x may itself be in place)
      else
        s.kind = StorageKind::Heap;
      storage_[v] = s;
    }
  }

  // Values in the blocks form: one their eqn writes as blocks gets its own allocation (or is
  // computed into the caller's buffer, of the same form); one computed whole is computed in
  // a buffer of its own, not the caller's, and converted (emit).
  for (const ir::Eqn &e : f.eqns)
    for (size_t k = 0; k < e.outs.size(); ++k) {
      const ir::Value *v = e.outs[k];
      Storage &s = storage_[v];
      if (!me.sizedAtRunTime(v)) continue;
      if (writesBlocks(e, k)) {
        if (s.kind == StorageKind::Heap || s.kind == StorageKind::Stack ||
            (s.kind == StorageKind::InPlace && e.prim == ir::Prim::Constant))  // (not a carry updated in place)
          s = {StorageKind::Blocks, -1, nullptr};
      } else if (s.kind == StorageKind::OutSlot) {
        s = {v->type.byteSize() <= kStackBytes ? StorageKind::Stack : StorageKind::Heap, -1, nullptr};
      }
    }

  // A loop that starts from a value in the blocks form read last there takes its buffer for
  // the carry (a loaded model's parameters are not held twice).
  std::unordered_map<const ir::Value *, int> timesRead;
  for (const ir::Eqn &e : f.eqns)
    for (const ir::Value *v : e.ins) ++timesRead[v];
  for (const ir::Value *v : f.results) ++timesRead[v];
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    const ir::Eqn &e = f.eqns[i];
    if (e.prim != ir::Prim::Loop && e.prim != ir::Prim::While) continue;
    const size_t consts = (size_t)e.intParam("num_consts");
    for (size_t j = 0; j < e.outs.size() && consts + j < e.ins.size(); ++j) {
      const ir::Value *init = e.ins[consts + j], *out = e.outs[j];
      auto st = storage_.find(init);
      if (st == storage_.end() || st->second.kind != StorageKind::Blocks || storage_[out].kind != StorageKind::Blocks ||
          lastRead[init] != i || timesRead[init] != 1)
        continue;
      storage_[out] = {StorageKind::InPlace, -1, init};
      donated_.insert(init);
    }
  }
  planBlocksLastUse(lastRead);

  planArena(groupOf);
}

bool FuncEmitter::initialCarry(const ir::Eqn &e, size_t k) {
  return (e.prim == ir::Prim::Loop || e.prim == ir::Prim::While) && k >= (size_t)e.intParam("num_consts");
}

void FuncEmitter::initCarry(llvm::Value *dst, const ir::Value *init, const ir::Value *carry) {
  if (!recomputedInLoops(init)) {
    llvm::Value *src = buffer(init);
    if (src != dst) copyValue(dst, src, carry);  // (the loop's buffer may be its initial value's)
    return;
  }
  fillSplat(dst, bytesOf(carry), *splatConstants_.at(init));
}

// The values a reshape or pbroadcast gives another name for their bytes.
std::unordered_set<const ir::Value *> FuncEmitter::renamedValues(const ir::Func &f) {
  std::unordered_set<const ir::Value *> renamed;
  for (const ir::Eqn &e : f.eqns)
    if (renamesOperand(f, e)) renamed.insert(e.ins[0]);
  return renamed;
}

// Whether slice `e` takes consecutive elements of its operand (unit strides; every dimension
// before the first it cuts to more than one index is cut to one, every one after it is
// whole), so that its result can be a view into the operand's buffer (StorageKind::Alias at
// an offset): a block of rows, one row, a leading-dimension range of a flat array (the
// pieces of a combined gradient sum, the block all_gather sends).
bool FuncEmitter::isContiguousSlice(const ir::Eqn &e, int64_t *offsetBytes) {
  if (e.prim != ir::Prim::Slice) return false;
  const std::vector<int64_t> &shape = e.ins[0]->type.shape;
  const std::vector<int64_t> &start = e.intsParam("start"), &limit = e.intsParam("limit"),
                             &strides = e.intsParam("strides");
  const size_t r = shape.size();
  size_t k = 0;
  while (k < r && limit[k] - start[k] == 1) ++k;  // the first dimension with more than one index
  for (size_t d = 0; d < r; ++d)
    if (strides[d] != 1 || (d > k && (start[d] != 0 || limit[d] != shape[d]))) return false;
  if (offsetBytes) {
    int64_t at = 0, stride = 1;
    for (size_t d = r; d-- > 0;) {
      at += start[d] * stride;
      stride *= shape[d];
    }
    *offsetBytes = at * ir::dtypeSize(e.ins[0]->type.dtype);
  }
  return true;
}

// Whether `e`'s result is its operand's bytes under another name: a reshape, a pbroadcast
// or invariant_cast, and a sum over a group of one device (each device its own group: a 1x1 mesh's gradient
// sums, a size-1 axis), which the runtime is still called for (its statistics and checks
// count the call) but with the result in the operand's buffer, so that it moves nothing.
bool FuncEmitter::renamesOperand(const ir::Func &f, const ir::Eqn &e) {
  if (e.prim == ir::Prim::Reshape || e.prim == ir::Prim::Pbroadcast || e.prim == ir::Prim::InvariantCast)
    return true;
  if (e.prim == ir::Prim::Slice) return isContiguousSlice(e, nullptr);
  if ((e.prim != ir::Prim::Psum2 && e.prim != ir::Prim::Psum) || !f.mesh || e.ins.size() != 1) return false;
  for (int64_t a : e.intsParam("axes"))
    if (f.mesh->sizes[(size_t)a] != 1) return false;
  return true;
}

// Whether the fused loop of eqns [first, last] may write the value eqn i computes over the
// bytes of x. The loop writes element j after reading element j of x, so it is safe when no
// eqn reads x after the loop, the loop reads x only at its own index (not through a broadcast,
// a transpose or a concatenation), first at or before eqn i (an iteration loads each input once, at its first
// use), and x has no other name (a reshape or pbroadcast of it). Used for values in the arena
// (donor) and for while carries (carriesInPlace).
bool FuncEmitter::overwritable(const ir::Func &f, size_t first, size_t last, size_t i, const ir::Value *x,
                               const std::unordered_map<const ir::Value *, size_t> &lastRead,
                               const std::unordered_set<const ir::Value *> &renamed) {
  auto lr = lastRead.find(x);
  if ((lr != lastRead.end() && lr->second > last) || renamed.count(x)) return false;
  bool read = false;
  for (size_t k = first; k <= last; ++k)
    for (const ir::Value *y : f.eqns[k].ins) {
      if (y != x) continue;
      if (!readsAtOwnIndex(f.eqns[k]) || (!read && k > i)) return false;
      read = true;
    }
  return true;
}

// In place: the value `v` that eqn i of a fused group stores may take the bytes of an input of
// the group that dies there (`w = w - lr * g`: w's bytes become the new w's), which saves a
// buffer and a pass of cache misses: an arena value (or itself in place) of v's size, not a
// one-element value, that the loop may overwrite (overwritable) and that no other value took.
const ir::Value *FuncEmitter::donor(size_t i, const ir::Value *v, const std::vector<int> &groupOf,
                                    const std::unordered_map<const ir::Value *, size_t> &lastRead) {
  const auto &[first, last] = groups_[(size_t)groupOf[i]];
  const int64_t n = v->type.numElements();
  if (n <= 1) return nullptr;
  for (size_t k = first; k <= i; ++k)
    for (const ir::Value *x : f.eqns[k].ins) {
      auto st = storage_.find(x);
      if (st == storage_.end() || donated_.count(x) ||
          (st->second.kind != StorageKind::Heap && st->second.kind != StorageKind::InPlace))
        continue;
      if (x->type.numElements() != n || x->type.byteSize() != v->type.byteSize()) continue;
      if (!overwritable(f, first, last, i, x, lastRead, renamed_)) continue;
      donated_.insert(x);
      return x;
    }
  return nullptr;
}

// The arena offsets of the Heap values. A value occupies its bytes from the first eqn of the
// group (or single eqn) that defines it to the last eqn of the one that last reads it,
// directly or through an alias, both included: an eqn's outputs never share bytes with its
// inputs, nor the values of one fused loop with each other. Offsets are found first-fit in
// definition order, 64-byte aligned.
//
// The free bytes are kept as gaps between the live spans (and the free tail after the last):
// a forward pass under grad keeps thousands of residuals live until its backward pass, and
// scanning every live span for each new one was quadratic in the program (a 40,000-statement
// chain spent 2 of its 3 seconds of code emission here). Live residuals sit side by side, so
// the gaps stay few: expiring a span is a heap pop and a merge with its neighbouring gaps,
// and placing one scans the gaps, not the spans. The offsets are those the scan of live spans
// gave: the lowest gap the value fits in.
void FuncEmitter::planArena(const std::vector<int> &groupOf) {
  const size_t n = f.eqns.size();
  uint64_t steps = n;
  std::vector<size_t> unitFirst(n), unitLast(n);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && groupOf[i] >= 0 && groupOf[j + 1] == groupOf[i]) ++j;
    for (size_t k = i; k <= j; ++k) unitFirst[k] = i, unitLast[k] = j;
    i = j + 1;
  }
  struct Span {
    const ir::Value *v;
    size_t first, last;
    int64_t offset, bytes;
  };
  std::vector<Span> spans;
  std::unordered_map<const ir::Value *, size_t> spanOf;
  for (size_t i = 0; i < n; ++i) {
    // (a Heap value is first touched by the eqn defining it)
    auto touch = [&](const ir::Value *v) {
      const ir::Value *r = root(v);
      if (storage_[r].kind != StorageKind::Heap) return;
      auto [it, fresh] = spanOf.emplace(r, spans.size());
      if (fresh)
        spans.push_back({r, unitFirst[i], unitLast[i], 0, (r->type.byteSize() + 63) / 64 * 64});
      else
        spans[it->second].last = std::max(spans[it->second].last, unitLast[i]);
    };
    for (const ir::Value *v : f.eqns[i].ins) touch(v);
    for (const ir::Value *v : f.eqns[i].outs) touch(v);
  }
  // gaps: offset -> bytes of each free run below `tail` (from which everything is free),
  // never two adjacent; live: the placed spans by the last eqn they live to, soonest first.
  std::map<int64_t, int64_t> gaps;
  int64_t tail = 0;
  using Live = std::pair<size_t, const Span *>;
  std::priority_queue<Live, std::vector<Live>, std::greater<Live>> live;
  auto release = [&](int64_t at, int64_t bytes) {
    auto next = gaps.lower_bound(at);
    if (next != gaps.end() && next->first == at + bytes) {  // merge with the gap above
      bytes += next->second;
      next = gaps.erase(next);
    }
    if (next != gaps.begin()) {  // ... and the one below
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        at = prev->first;
        bytes += prev->second;
        gaps.erase(prev);
      }
    }
    if (at + bytes == tail) tail = at;  // the top of the arena is free again
    else gaps[at] = bytes;
  };
  for (Span &s : spans) {
    while (!live.empty() && live.top().first < s.first) {
      release(live.top().second->offset, live.top().second->bytes);
      live.pop();
      ++steps;
    }
    s.offset = tail;
    for (auto g = gaps.begin(); g != gaps.end(); ++g) {
      ++steps;
      if (g->second < s.bytes) continue;
      s.offset = g->first;
      if (g->second > s.bytes) gaps[g->first + s.bytes] = g->second - s.bytes;
      gaps.erase(g);
      break;
    }
    if (s.offset == tail) tail += s.bytes;
    live.push({s.last, &s});
    arenaBytes_ = std::max(arenaBytes_, s.offset + s.bytes);
    arenaOffset_[s.v] = s.offset;
  }
  work::add(steps);
  if (FuncPlan *record = planRecord()) {
    for (const Span &s : spans) record->arena.push_back({s.v, s.first, s.last, s.offset, s.bytes});
    record->arenaBytes = arenaBytes_;
  }
}

FuncPlan *FuncEmitter::planRecord() { return planIndex_ >= 0 ? &me.plan->funcs[(size_t)planIndex_] : nullptr; }

void FuncEmitter::noteKernel(size_t eqn, const std::string &call) {
  if (FuncPlan *record = planRecord()) record->kernels.push_back({eqn, call});
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

  if (me.plan) {
    planIndex_ = (int)me.plan->funcs.size();
    me.plan->funcs.push_back({});
    me.plan->funcs.back().func = &f;
  }
  plan();
  if (FuncPlan *record = planRecord()) {
    record->groups = groups_;
    record->storage = storage_;
    auto kept = [&](const ir::Value *v) {
      if (const ModuleEmitter::GroupOwner *owner = me.groupOwner(v)) record->keptByGroup[v] = owner->group;
    };
    for (const ir::Value *v : f.params) kept(v);
    for (const ir::Eqn &e : f.eqns)
      for (const ir::Value *v : e.outs) kept(v);
  }
  if (arenaBytes_ > 0) arena_ = callRt("shm_alloc", {i64(arenaBytes_)}, "arena");
  // The blocks arena's set-up goes into a block of its own before the body, filled once the
  // body has said what slots it needs (emitBlocksArena).
  blocksSetup_ = llvm::BasicBlock::Create(me.ctx, "blocks.setup", fn);
  b.CreateBr(blocksSetup_);
  llvm::BasicBlock *start = llvm::BasicBlock::Create(me.ctx, "body", fn);
  llvm::BranchInst::Create(start, blocksSetup_);
  b.SetInsertPoint(start);
  // A parameter's pointer is loaded, and a view's address computed, where an equation first
  // needs it (buffer), and a result's slot where its value is defined (allocateOuts): made all
  // on entry, a backward pass with thousands of residuals kept thousands of pointers live
  // across every call of the function, which LLVM's instruction selection and register
  // allocation took time superlinear in.
  for (size_t i = 0; i < f.params.size(); ++i) paramIndex_[f.params[i]] = i;
  size_t nextGroup = 0;
  for (size_t i = 0; i < f.eqns.size();) {
    size_t last = i;
    if (nextGroup < groups_.size() && groups_[nextGroup].first == i) last = groups_[nextGroup].second;
    markTopLevel();  // (pointers made on demand go before this equation's code)
    for (size_t k = i; k <= last; ++k) allocateOuts(f.eqns[k]);
    if (nextGroup < groups_.size() && groups_[nextGroup].first == i) {
      ++nextGroup;
      if (!emitElementwiseGroup(i, last)) return false;
    } else {
      if (!emitEqn(i)) return false;
    }
    if (!me.error.empty()) return false;
    for (size_t k = i; k <= last; ++k)
      for (size_t j = 0; j < f.eqns[k].outs.size(); ++j)
        if (me.sizedAtRunTime(f.eqns[k].outs[j]) && !writesBlocks(f.eqns[k], j)) convertToBlocks(f.eqns[k].outs[j]);
        else if (me.wholeAfterLoop(f.eqns[k].outs[j])) convertFromOwned(f.eqns[k].outs[j]);
    freeDeadBlocks(last);
    i = last + 1;
  }
  markTopLevel();
  emitResults();
  for (llvm::Value *p : scratch_) callRt("shm_free", {p});
  if (blocksBase_) callRt("shm_blocks_free", {b.CreateLoad(me.ptrTy, blocksBase_)});
  if (arena_) callRt("shm_free", {arena_});
  emitBlocksArena();
  b.CreateRetVoid();
  return me.error.empty();
}

// The point where materialize puts pointers made on demand: the end of the current top-level
// block, before the code of what is emitted next.
void FuncEmitter::markTopLevel() {
  markBlock_ = b.GetInsertBlock();
  markAfter_ = markBlock_->empty() ? nullptr : &markBlock_->back();
}

// The name of v's buffer in the LLVM IR.
static std::string bufferName(const ir::Value *v) {
  return (v->hint.empty() ? "v" + std::to_string(v->id) : v->hint) + ".buf";
}

void FuncEmitter::allocateOuts(const ir::Eqn &e) {
  for (const ir::Value *v : e.outs) {
    const Storage &s = storage_[v];
    const std::string name = bufferName(v);
    switch (s.kind) {
    case StorageKind::OutSlot:
      if (!buffers_.count(v))
        buffers_[v] = b.CreateLoad(me.ptrTy, b.CreateConstGEP1_64(me.ptrTy, outsArg, s.slot),
                                   "out" + std::to_string(s.slot));
      break;
    case StorageKind::Param:
    case StorageKind::Global:   // set by emitConstant
    case StorageKind::Fused: break;
    case StorageKind::Alias:  // (materialize: where first needed)
    case StorageKind::InPlace: break;
    case StorageKind::Stack:
      buffers_[v] = entryAlloca(me.i8Ty, std::max<int64_t>(1, v->type.byteSize()), name.c_str());
      break;
    case StorageKind::Heap:
      buffers_[v] = b.CreateConstInBoundsGEP1_64(me.i8Ty, arena_, (uint64_t)arenaOffset_.at(v), name);
      break;
    case StorageKind::Blocks: {
      llvm::Value *p = allocBlocks(v, v);
      buffers_[v] = p;
      if (e.prim == ir::Prim::Constant) fillSplat(p, bytesOf(v), e);  // (every element of every block alike)
      break;
    }
    }
  }
}

// v's pointer, made if it is a parameter or a view not made yet: at the top level, just before
// the code of the equation being emitted (markAfter_), where it dominates that code and all
// that follows, even when the equation asks for it inside a loop's or conditional's blocks.
llvm::Value *FuncEmitter::materialize(const ir::Value *v) {
  auto p = paramIndex_.find(v);
  auto st = storage_.find(v);
  const bool view = st != storage_.end() && (st->second.kind == StorageKind::Alias || st->second.kind == StorageKind::InPlace);
  if ((p == paramIndex_.end() && !view) || !markBlock_) return nullptr;
  llvm::Value *made = nullptr, *base = nullptr;
  if (view) {
    base = buffers_.count(st->second.aliasOf) ? buffers_.at(st->second.aliasOf) : materialize(st->second.aliasOf);
    if (!base) return nullptr;
    if (st->second.kind == StorageKind::InPlace || st->second.offset == 0) return buffers_[v] = base;
  }
  llvm::IRBuilder<> at(markBlock_, markAfter_ ? std::next(markAfter_->getIterator()) : markBlock_->getFirstInsertionPt());
  if (view) {
    made = at.CreateConstInBoundsGEP1_64(me.i8Ty, base, (uint64_t)st->second.offset, bufferName(v));
  } else {
    made = at.CreateLoad(me.ptrTy, at.CreateConstGEP1_64(me.ptrTy, insArg, p->second), "in" + std::to_string(p->second));
  }
  if (auto *inst = llvm::dyn_cast<llvm::Instruction>(made)) markAfter_ = inst;  // (the next goes after it)
  return buffers_[v] = made;
}

void FuncEmitter::emitResults() {
  for (size_t i = 0; i < f.results.size(); ++i) {
    const ir::Value *v = f.results[i];
    const Storage &s = storage_[v];
    if (s.kind == StorageKind::OutSlot && s.slot == (int)i) continue;
    const Storage &named = storage_[root(v)];  // (computed into its slot under another name)
    if (s.kind == StorageKind::Alias && named.kind == StorageKind::OutSlot && named.slot == (int)i) continue;
    if (s.kind == StorageKind::InPlace && storage_[s.aliasOf].kind == StorageKind::Param) continue;  // a carry
    llvm::Value *dst = b.CreateLoad(me.ptrTy, b.CreateConstGEP1_64(me.ptrTy, outsArg, i));
    copyValue(dst, buffer(v), v);
  }
}

llvm::Value *FuncEmitter::buffer(const ir::Value *v) {
  auto it = buffers_.find(v);
  if (it != buffers_.end()) return it->second;
  if (llvm::Value *made = materialize(v)) return made;
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
  // A table of thousands (savez of thousands of arrays) took LLVM time quadratic in its
  // length: InstCombine revisits the alloca for each of its users, and the machine scheduler
  // compares each store of a region with the stores before it. So a long table is filled
  // kChunk entries at a time, each chunk through a pointer opaquePointer() makes: the alloca
  // has one user per chunk, and the call ends the scheduler's region.
  constexpr size_t kChunk = 256;
  llvm::Value *base = arr;
  for (size_t i = 0; i < ptrs.size(); ++i) {
    if (ptrs.size() > kChunk && i % kChunk == 0)
      base = b.CreateCall(me.opaquePointer(), {b.CreateConstGEP1_64(me.ptrTy, arr, i)});
    b.CreateStore(ptrs[i], b.CreateConstGEP1_64(me.ptrTy, base, ptrs.size() > kChunk ? i % kChunk : i));
  }
  return arr;
}

llvm::Value *FuncEmitter::scratch(const ir::Type &t) {
  if (t.byteSize() <= kStackBytes)
    return entryAlloca(me.i8Ty, std::max<int64_t>(1, t.byteSize()), "scratch");
  llvm::Value *p = callRt("shm_alloc", {i64(t.byteSize())});
  scratch_.push_back(p);
  return p;
}

// The runtime's collectives (shmap_runtime.h): each waits for its group, so the watchdog may
// report it (tests/watchdog/check_locations.py checks that every one is called with a location).
static bool isCollectiveEntry(const std::string &name) {
  static const std::unordered_set<std::string> names = {
      "shm_psum",       "shm_pmax",         "shm_pmin",       "shm_pprod",    "shm_pbitwise",
      "shm_all_gather", "shm_psum_scatter", "shm_all_to_all", "shm_ppermute", "shm_broadcast",
      "shm_reduce_to",  "shm_gather_to",    "shm_scatter_from"};
  return names.count(name) != 0;
}

llvm::CallInst *FuncEmitter::callRt(const std::string &name, std::vector<llvm::Value *> args,
                                    const char *result) {
  // The location travels as a store into the device's first word rather than as an argument:
  // one store of a constant on a line only this device writes, no change to thirteen entry
  // points' signatures (nor to their C callers), and the runtime moves it into the note it
  // writes anyway for the watchdog (sync.cpp). Collectives run only in shmap bodies, where
  // `dev` is a device.
  if (isCollectiveEntry(name))
    if (llvm::Constant *loc = me.locationString(eqnLoc_)) b.CreateStore(loc, dev);
  return b.CreateCall(me.runtime(name), args, result);
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
