// sink-reductions: in the backward bodies autodiff makes for shmaps, a sum over devices whose
// only reader keeps one block of it is reduced into that block instead.
//
// Transposing a forward pass turns its pbroadcasts into psum2 (an all-reduce) and its
// all_gather_invariants into pscatter (each device keeps its block, no communication), so a
// backward body often reads
//     s = psum2[axes=A](c);  p = pscatter[axes=B, axis=d](s)
// (a weight replicated over A and gathered along B: its gradient summed over A, then the
// block each device holds). That all-reduces the whole array to keep a block of it. With the
// axes of B taken in their listed order (pscatter's block index over several axes is
// row-major in that order, so a pscatter over B = B1 ++ B2 is a pscatter over B1 and then,
// of that block, one over B2), each maximal run R of B:
//   - outside A: pscatter[R] commutes with the sum, since every device of an A-group has the
//     same coordinates on R and so keeps the same block of each summand;
//   - inside A: summing over R and keeping the block at this device's index over R is
//     psum_scatter[R, scatter_dimension=d] (the runtime folds block g.me, the index
//     axis_index gives pscatter);
// and what is left of A (the axes not in B) is summed last, on the block:
//     psum_scatter / pscatter per run of B, then psum2[A minus B].
// The communication model (the `comm` rules of prims/AllReduce.cpp and Gather.cpp, after the runtime's psum and psum_scatter) has each
// device of a group of n receive (n-1)/n of an all-reduced array of E elements, and
// (n-1)/n of a psum_scatter's operand: with B within A a device receives (n_B-1) E / n_B +
// (n_C-1) E / (n_B n_C) = (n_A-1) E / n_A (C = A minus B), exactly what the all-reduce of the
// whole array gave it, in a reduce-scatter that folds only its block and (B a strict part of
// A) an all-reduce of the block; with runs of B outside A it receives the block's share only.
// (Counted as the operands a device puts into collectives, tests/jax/jit_vs_xla.py's measure,
// B a strict part of A puts in E + E / n_B where the all-reduce put in E.) Untiled pscatters
// (one row, its dimension dropped) are rewritten only when B is one run. A psum2 with other
// readers is left (its whole sum is needed anyway), and so is anything outside backward
// bodies: forward code communicates as its author wrote it. Only a backward shmap body's own
// equations are rewritten, not the loops and conditionals nested in it.
//
// Variance: c varies over A (psum2's rule), s = psum2[A](c) is invariant over B (pscatter's),
// so c is invariant over the runs outside A, as pscatter needs, and varies over the runs inside
// A, as psum_scatter needs; the result varies over (c's axes minus A) plus B, as p did. The
// rewrite is made only when the types it computes are p's.
#include "passes/reductions/Reductions.h"
#include "rules/Rules.h"

#include <map>

namespace shmapc::passes {

namespace {

using namespace ir;

AxisSet setOf(const std::vector<int64_t> &axes) {
  AxisSet s = 0;
  for (int64_t a : axes) s |= AxisSet(1) << a;
  return s;
}

// The equations replacing `psum2` and the `pscatter` that alone reads it, or none when the
// pattern does not apply. The last one defines the pscatter's result value.
std::vector<Eqn> sink(Func &f, const Eqn &psum2, const Eqn &pscatter) {
  const Mesh &mesh = *f.mesh;
  const std::vector<int64_t> &A = psum2.intsParam("axes"), &B = pscatter.intsParam("axes");
  AxisSet inA = setOf(A), inB = setOf(B);
  Value *c = psum2.ins[0];
  if (A.empty() || B.empty() || (c->type.vary & inA) != inA) return {};
  for (int64_t a : A)
    if (a < 0 || a >= (int64_t)mesh.sizes.size()) return {};
  for (int64_t a : B)
    if (a < 0 || a >= (int64_t)mesh.sizes.size()) return {};
  const int64_t d = pscatter.intParam("axis");
  const bool tiled = pscatter.intParam("tiled") != 0;
  if (d < 0 || d >= c->type.rank()) return {};

  // The maximal runs of B, in order, each inside A or outside it.
  std::vector<std::vector<int64_t>> runs;
  for (size_t k = 0; k < B.size(); ++k) {
    bool in = (inA >> B[k]) & 1;
    if (k > 0 && in == (bool)((inA >> B[k - 1]) & 1)) runs.back().push_back(B[k]);
    else runs.push_back({B[k]});
  }
  if (!tiled && runs.size() > 1) return {};  // (an untiled block is one row: no refining it)

  // The chain's equations, typed first; their values are made once it is known to apply.
  struct Step {
    Prim prim;
    std::map<std::string, Attr> params;
    Type type;
    Loc loc;
  };
  std::vector<Step> steps;
  Type t = c->type;
  for (const std::vector<int64_t> &run : runs) {
    int64_t n = mesh.groupSize(setOf(run));
    if (tiled ? t.shape[(size_t)d] % n != 0 : t.shape[(size_t)d] != n) return {};
    if (tiled) t.shape[(size_t)d] /= n;
    else t.shape.erase(t.shape.begin() + d);
    if ((inA >> run[0]) & 1) {
      steps.push_back({Prim::PsumScatter, {{"axes", run}, {"scatter_dimension", d}, {"tiled", (int64_t)tiled}}, t,
                       psum2.loc});
    } else {
      t.vary |= setOf(run);
      steps.push_back({Prim::Pscatter, {{"axes", run}, {"axis", d}, {"tiled", (int64_t)tiled}}, t, pscatter.loc});
    }
  }
  std::vector<int64_t> rest;
  for (int64_t a : A)
    if (!((inB >> a) & 1)) rest.push_back(a);
  if (!rest.empty()) {
    t.vary &= ~setOf(rest);
    steps.push_back({Prim::Psum2, {{"axes", rest}}, t, psum2.loc});
  }
  if (t != pscatter.outs[0]->type) return {};

  std::vector<Eqn> out;
  Value *x = c;
  for (size_t k = 0; k < steps.size(); ++k) {
    out.push_back(rules::makeEqn(f, steps[k].prim, {x}, std::move(steps[k].params), steps[k].loc,
                                 {.declared = &steps[k].type, .into = k + 1 == steps.size() ? pscatter.outs[0] : nullptr}));
    x = out.back().outs[0];
  }
  return out;
}

// Every rewrite in `f` that applies to its equations as they stand, in one walk (each psum2 is
// read by one pscatter at most, so the rewrites are independent); true if any did. A chain
// ending in a psum2 may itself be read by one pscatter: the caller walks again.
bool sinkAll(Func &f) {
  std::map<const Value *, int> reads;
  for (const Eqn &e : f.eqns)
    for (const Value *v : e.ins) ++reads[v];
  for (const Value *v : f.results) ++reads[v];
  std::map<const Value *, size_t> psumOf;       // a psum2's result -> its equation's index
  std::map<size_t, std::vector<Eqn>> replaced;  // a pscatter's index -> what stands there
  std::vector<bool> dropped(f.eqns.size(), false);
  for (size_t j = 0; j < f.eqns.size(); ++j) {
    const Eqn &e = f.eqns[j];
    if (e.prim == Prim::Psum2 && e.ins.size() == 1 && e.outs.size() == 1) psumOf[e.outs[0]] = j;
    if (e.prim != Prim::Pscatter || e.ins.size() != 1 || e.outs.size() != 1) continue;
    auto it = psumOf.find(e.ins[0]);
    if (it == psumOf.end() || reads[e.ins[0]] != 1) continue;
    std::vector<Eqn> repl = sink(f, f.eqns[it->second], e);
    if (repl.empty()) continue;
    // (the psum2's operand is defined before it, so the chain may stand where the pscatter
    // stood, and the psum2 goes)
    dropped[it->second] = true;
    replaced[j] = std::move(repl);
  }
  if (replaced.empty()) return false;
  std::vector<Eqn> eqns;
  for (size_t k = 0; k < f.eqns.size(); ++k) {
    if (dropped[k]) continue;
    auto r = replaced.find(k);
    if (r == replaced.end()) {
      eqns.push_back(std::move(f.eqns[k]));
      continue;
    }
    for (Eqn &e : r->second) eqns.push_back(std::move(e));
  }
  f.eqns = std::move(eqns);
  return true;
}

} // namespace

void sinkReductions(Module &m, Diagnostics &) {
  for (auto &f : m.funcs)
    if (f->isBackward && f->checkVma && f->mesh)
      while (sinkAll(*f)) {
      }
}

} // namespace shmapc::passes
