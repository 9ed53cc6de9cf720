// fold-transposes: a matmul operand made by a transpose that swaps its last two dimensions is
// read through BLAS's transpose flag instead (transpose_lhs / transpose_rhs, prims/Matmul.cpp),
// and the transpose is dropped when nothing else reads it. The backward pass of x @ w is
// dy @ w^T and x^T @ dy: without this each step copies x and w transposed. Runs
// after autodiff, so the jvp and transpose rules never see the flags.
#include "passes/Passes.h"

#include <map>
#include <set>

namespace shmapc::passes {

namespace {

using namespace ir;

// A transpose whose permutation is (0, 1, ..., r-3, r-1, r-2): batch dimensions in place.
bool swapsLastTwo(const Eqn &e) {
  if (e.prim != Prim::Transpose) return false;
  const std::vector<int64_t> &perm = e.intsParam("permutation");
  int64_t r = (int64_t)perm.size();
  if (r < 2) return false;
  for (int64_t d = 0; d + 2 < r; ++d)
    if (perm[d] != d) return false;
  return perm[r - 2] == r - 1 && perm[r - 1] == r - 2;
}

// The flag that reads a matmul operand transposed, as set (absent: 0).
bool flagOf(const Eqn &e, const char *flag) { return e.has(flag) && e.intParam(flag); }

void foldInFunc(Func &f) {
  std::map<const Value *, int> reads;
  for (const Eqn &e : f.eqns)
    for (const Value *v : e.ins) ++reads[v];
  for (const Value *v : f.results) ++reads[v];
  // A transpose of a matmul's result that nothing else reads is the matmul of the operands
  // swapped, each read the other way: (A B)^T = B^T A^T, and BLAS writes it in that layout
  // directly (the backward pass's x^T @ dy for a weight used as w^T is one such).
  std::map<const Value *, Eqn *> matmulOf;
  for (Eqn &e : f.eqns)
    if (e.prim == Prim::Matmul && e.ins.size() == 2 && e.outs.size() == 1) matmulOf[e.outs[0]] = &e;
  bool folded = false;
  for (Eqn &e : f.eqns) {
    if (!swapsLastTwo(e)) continue;
    auto it = matmulOf.find(e.ins[0]);
    if (it == matmulOf.end() || reads[e.ins[0]] != 1) continue;
    Eqn &mm = *it->second;
    const bool lhs = flagOf(mm, "transpose_lhs"), rhs = flagOf(mm, "transpose_rhs");
    std::swap(mm.ins[0], mm.ins[1]);
    mm.params["transpose_lhs"] = (int64_t)!rhs;
    mm.params["transpose_rhs"] = (int64_t)!lhs;
    mm.outs[0]->type = e.outs[0]->type;
    // The transpose's result is now the matmul's: rename its readers.
    Value *from = e.outs[0], *to = mm.outs[0];
    for (Eqn &r : f.eqns)
      for (Value *&v : r.ins)
        if (v == from) v = to;
    for (Value *&v : f.results)
      if (v == from) v = to;
    e.ins[0] = nullptr;  // (dropped below)
    folded = true;
  }
  if (folded) {
    std::vector<Eqn> kept;
    for (Eqn &e : f.eqns)
      if (!(swapsLastTwo(e) && e.ins[0] == nullptr)) kept.push_back(std::move(e));
    f.eqns = std::move(kept);
  }

  std::map<const Value *, const Eqn *> transposeOf;  // result -> its last-two-dims transpose
  for (const Eqn &e : f.eqns)
    if (swapsLastTwo(e)) transposeOf[e.outs[0]] = &e;
  if (transposeOf.empty()) return;
  folded = false;
  for (Eqn &e : f.eqns) {
    if (e.prim != Prim::Matmul) continue;
    const char *flags[2] = {"transpose_lhs", "transpose_rhs"};
    for (int k = 0; k < 2; ++k) {
      // (a transpose of a transpose, as the backward pass of x @ w^T makes: read as it is)
      for (auto it = transposeOf.find(e.ins[k]); it != transposeOf.end(); it = transposeOf.find(e.ins[k])) {
        e.ins[k] = it->second->ins[0];
        e.params[flags[k]] = (int64_t)!flagOf(e, flags[k]);
        folded = true;
      }
    }
  }
  if (!folded) return;
  // Drop the transposes nothing reads any more (and those only they read).
  for (size_t before = 0; before != f.eqns.size();) {
    before = f.eqns.size();
    std::set<const Value *> read(f.results.begin(), f.results.end());
    for (const Eqn &e : f.eqns) read.insert(e.ins.begin(), e.ins.end());
    std::vector<Eqn> kept;
    for (Eqn &e : f.eqns)
      if (!(swapsLastTwo(e) && !read.count(e.outs[0]))) kept.push_back(std::move(e));
    f.eqns = std::move(kept);
  }
}

} // namespace

void foldTransposesIntoMatmul(Module &m, Diagnostics &) {
  for (auto &f : m.funcs) foldInFunc(*f);
}

} // namespace shmapc::passes
