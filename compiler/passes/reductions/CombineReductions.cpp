// combine-reductions: in the backward bodies autodiff makes for shmaps, the gradient sums over
// devices (psum2) that can run at one point are made one psum2 of their operands laid end to
// end, as XLA's all-reduce combiner and DDP's gradient buckets do: the same bytes in fewer
// collectives, each of which costs every device of the group a meeting.
//
// A psum2 may run anywhere after its operand is computed and before its result is first read.
// Those over the same axes and of the same dtype whose ranges share a point are combined
// there: each operand flattened, the flat operands concatenated, one psum2, and each result
// sliced back out and reshaped to its shape (the results keep their values, so their readers
// are unchanged). The combined psum2 carries `combined` = how many it replaces, which
// --emit=ir and --emit=comm show. Only a backward body's own equations are combined (not the
// loops and conditionals nested in it): forward code communicates as its author wrote it
// (but for a sum defer-primal-reductions moved into the backward body: a returned loss's).
//
// Operands of different variance are joined too (the gradients of model-split weights, which
// vary over "data" and "model", with those of replicated ones, which vary over "data"): the
// joined operand varies over the union of their axes, so an operand that varies over fewer is
// first lifted by a pbroadcast (no bytes move), and its piece of the sum, which the types
// would then call varying over the extra axes, gets its own type back by an invariant_cast
// (no bytes either). That is sound because a sum over the psum2's axes of a value invariant
// over another axis is itself invariant over it: every device along it contributed the same
// values to the same sums. A psum2's bytes depend only on its group (its axes) and how many
// elements it sums, not on their variance, so the joined one sends exactly what the separate
// ones did together.
#include "passes/reductions/Reductions.h"
#include "rules/Rules.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace shmapc::passes {

namespace {

using namespace ir;

// A combined collective's operands are at most this many bytes (a bucket, as DDP's 25 MiB): a
// larger one would hold every gradient until the last is ready and double the peak memory of
// the sums for no fewer meetings worth having.
constexpr int64_t kBucketBytes = 32 << 20;

// Only sums of at most this many bytes each are combined: the operands are copied into the
// joined array and the results out of it, which for a larger one costs more than the meeting
// it saves (a 2 MiB gradient: ~0.4 ms of copies per device, against microseconds for a
// meeting of threads), while the small ones (biases, norms' scales: a few KiB) are the sums
// whose meetings dominate.
constexpr int64_t kCombineMaxBytes = 32 << 10;

struct Candidate {
  size_t index;            // the psum2's equation
  size_t earliest, latest; // it may stand before any equation in [earliest, latest]
  int64_t bytes;
};

// Where each psum2 of f may stand.
std::vector<Candidate> candidates(const Func &f) {
  std::map<const Value *, size_t> definedAt;  // (a parameter: 0)
  std::map<const Value *, size_t> firstRead;
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    for (const Value *v : f.eqns[i].ins) firstRead.try_emplace(v, i);
    for (const Value *v : f.eqns[i].outs) definedAt[v] = i + 1;
  }
  std::vector<Candidate> out;
  for (size_t i = 0; i < f.eqns.size(); ++i) {
    const Eqn &e = f.eqns[i];
    if (e.prim != Prim::Psum2 || e.ins.size() != 1 || e.outs.size() != 1 || !e.bodies.empty()) continue;
    // A sum over a group of one device meets no one: combining it would only copy its operand
    // into the joined array and back out.
    int64_t members = 1;
    for (int64_t a : e.intsParam("axes")) members *= f.mesh ? f.mesh->sizes[(size_t)a] : 2;
    if (members == 1) continue;
    // (a psum2 as variance inference types it: its operand varies over its axes, its result
    // over the operand's others; combine() relies on it to type the joined sum and the casts)
    const AxisSet axes = e.axesParamSet(), vary = e.ins[0]->type.vary;
    if ((vary & axes) != axes || e.outs[0]->type.vary != (vary & ~axes)) continue;
    const int64_t bytes = e.ins[0]->type.numElements() * dtypeSize(e.ins[0]->type.dtype);
    if (bytes > kCombineMaxBytes) continue;
    auto d = definedAt.find(e.ins[0]);
    auto r = firstRead.find(e.outs[0]);
    const size_t earliest = d == definedAt.end() ? 0 : d->second;
    const size_t latest = r == firstRead.end() ? f.eqns.size() : r->second;
    out.push_back({i, earliest, latest, bytes});
  }
  return out;
}

// The equations that compute `group`'s psum2s as one.
std::vector<Eqn> combine(Func &f, const std::vector<const Eqn *> &group) {
  std::vector<Eqn> out;
  auto add = [&](Prim p, std::vector<Value *> ins, const Type &t, std::map<std::string, Attr> params, Loc loc,
                 Value *into = nullptr) {
    out.push_back(rules::makeEqn(f, p, std::move(ins), std::move(params), loc, {.declared = &t, .into = into}));
    return out.back().outs[0];
  };
  const DType dtype = group[0]->ins[0]->type.dtype;
  const AxisSet summedAxes = group[0]->axesParamSet();
  AxisSet vary = 0;  // the joined operand's: the union of theirs
  for (const Eqn *e : group) vary |= e->ins[0]->type.vary;
  std::vector<Value *> flat;
  int64_t total = 0;
  for (const Eqn *e : group) {
    const Type &t = e->ins[0]->type;
    const int64_t n = t.numElements();
    Value *v = add(Prim::Reshape, {e->ins[0]}, Type{t.dtype, {n}, t.vary}, {}, e->loc);
    if (t.vary != vary)
      v = add(Prim::Pbroadcast, {v}, Type{t.dtype, {n}, vary}, {{"axes", axisList(vary & ~t.vary)}}, e->loc);
    flat.push_back(v);
    total += n;
  }
  const Loc loc = group.back()->loc;
  Value *joined = add(Prim::Concatenate, flat, Type{dtype, {total}, vary}, {{"dimension", (int64_t)0}}, loc);
  std::map<std::string, Attr> params = group[0]->params;
  params["combined"] = (int64_t)group.size();
  const AxisSet summedVary = vary & ~summedAxes;
  Value *summed = add(Prim::Psum2, {joined}, Type{dtype, {total}, summedVary}, params, loc);
  int64_t at = 0;
  for (const Eqn *e : group) {
    const Type &t = e->outs[0]->type;
    const int64_t n = t.numElements();
    Value *piece = add(Prim::Slice, {summed}, Type{t.dtype, {n}, summedVary},
                       {{"start", std::vector<int64_t>{at}}, {"limit", std::vector<int64_t>{at + n}},
                        {"strides", std::vector<int64_t>{1}}},
                       e->loc);
    if (t.vary != summedVary)  // (its operand was lifted: equal along the extra axes)
      piece = add(Prim::InvariantCast, {piece}, Type{t.dtype, {n}, t.vary},
                  {{"axes", axisList(summedVary & ~t.vary)}}, e->loc);
    add(Prim::Reshape, {piece}, t, {}, e->loc, e->outs[0]);
    at += n;
  }
  return out;
}

void combineIn(Func &f) {
  std::vector<Candidate> all = candidates(f);
  // (axes, dtype) -> the candidates that may be combined
  std::map<std::tuple<std::vector<int64_t>, DType>, std::vector<Candidate>> kinds;
  for (const Candidate &c : all) {
    const Eqn &e = f.eqns[c.index];
    kinds[{e.intsParam("axes"), e.ins[0]->type.dtype}].push_back(c);
  }
  std::map<size_t, std::vector<Eqn>> before;  // equations to stand before equation i
  std::vector<bool> gone(f.eqns.size(), false);
  for (auto &[kind, list] : kinds) {
    if (list.size() < 2) continue;
    std::sort(list.begin(), list.end(), [](const Candidate &a, const Candidate &b) {
      return std::tie(a.earliest, a.index) < std::tie(b.earliest, b.index);
    });
    // Greedy: a bucket takes the next candidate while their ranges still share a point.
    for (size_t i = 0; i < list.size();) {
      size_t lo = list[i].earliest, hi = list[i].latest, j = i + 1;
      int64_t bytes = list[i].bytes;
      while (j < list.size() && list[j].earliest <= hi && bytes + list[j].bytes <= kBucketBytes) {
        lo = std::max(lo, list[j].earliest);
        hi = std::min(hi, list[j].latest);
        bytes += list[j].bytes;
        ++j;
      }
      if (j - i >= 2) {
        std::vector<const Eqn *> group;
        for (size_t k = i; k < j; ++k) {
          group.push_back(&f.eqns[list[k].index]);
          gone[list[k].index] = true;
        }
        std::vector<Eqn> made = combine(f, group);
        std::vector<Eqn> &at = before[lo];
        for (Eqn &e : made) at.push_back(std::move(e));
      }
      i = j;
    }
  }
  if (before.empty()) return;
  std::vector<Eqn> eqns;
  for (size_t i = 0; i <= f.eqns.size(); ++i) {
    if (auto it = before.find(i); it != before.end())
      for (Eqn &e : it->second) eqns.push_back(std::move(e));
    if (i < f.eqns.size() && !gone[i]) eqns.push_back(std::move(f.eqns[i]));
  }
  f.eqns = std::move(eqns);
}

} // namespace

void combineReductions(Module &m, Diagnostics &) {
  for (auto &f : m.funcs)
    if (f->isBackward && f->checkVma && f->mesh) combineIn(*f);
}

} // namespace shmapc::passes
