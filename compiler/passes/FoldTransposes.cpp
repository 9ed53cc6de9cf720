// fold-transposes: a matmul operand made by a transpose that swaps its last two dimensions is
// read through BLAS's transpose flag instead (transpose_lhs / transpose_rhs, prims/Matmul.cpp),
// and the transpose is dropped when nothing else reads it. The backward pass of x @ w is
// dy @ w^T and x^T @ dy: without this each step copies x and w transposed (issue 11). Runs
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

void foldInFunc(Func &f) {
  std::map<const Value *, const Eqn *> transposeOf;  // result -> its last-two-dims transpose
  for (const Eqn &e : f.eqns)
    if (swapsLastTwo(e)) transposeOf[e.outs[0]] = &e;
  if (transposeOf.empty()) return;
  bool folded = false;
  for (Eqn &e : f.eqns) {
    if (e.prim != Prim::Matmul) continue;
    const char *flags[2] = {"transpose_lhs", "transpose_rhs"};
    for (int k = 0; k < 2; ++k) {
      auto it = transposeOf.find(e.ins[k]);
      if (it == transposeOf.end() || (e.has(flags[k]) && e.intParam(flags[k]))) continue;
      e.ins[k] = it->second->ins[0];
      e.params[flags[k]] = (int64_t)1;
      folded = true;
    }
  }
  if (!folded) return;
  // Drop the transposes nothing reads any more.
  std::set<const Value *> read(f.results.begin(), f.results.end());
  for (const Eqn &e : f.eqns) read.insert(e.ins.begin(), e.ins.end());
  std::vector<Eqn> kept;
  for (Eqn &e : f.eqns)
    if (!(swapsLastTwo(e) && !read.count(e.outs[0]))) kept.push_back(std::move(e));
  f.eqns = std::move(kept);
}

} // namespace

void foldTransposesIntoMatmul(Module &m, Diagnostics &) {
  for (auto &f : m.funcs) foldInFunc(*f);
}

} // namespace shmapc::passes
