// What a shape rule (Rules::shape, the abstract evaluation) receives, and the rules several
// primitives share. A rule reads the operands' types and the params, and either appends one
// Type per result to `outs` and returns true, or returns c.fail("what is wrong"). Fixed operand
// and result counts (Primitives.def) are checked before the rule runs (shapeProblem), so a rule
// may read c.in(0) of a one-operand primitive and c.declared() of a one-result one.
#pragma once
#include "ir/IR.h"
#include "source/Diagnostics.h"

#include <optional>
#include <string>
#include <vector>

namespace shmapc::rules {

struct ShapeCtx {
  const ir::Eqn &e;
  const ir::Func &f;             // the function `e` is in: its mesh gives collectives' group sizes
  std::vector<ir::Type> outs{};  // the rule's answer: one per result (vary 0)
  std::string why{};             // the rule's reason for refusing
  // Where a refusal a user can cause points (failOperand, failParam): the operand or the
  // param at fault, the registered diagnostic, and what to do. Sema reports it at that
  // argument's location; elsewhere a refusal is a compiler bug and these go unread.
  int badOperand = -1;
  const char *badParam = nullptr;
  std::optional<DiagId> diag{};
  std::string hint{};

  const ir::Type &in(size_t i) const { return e.ins[i]->type; }
  size_t numIns() const { return e.ins.size(); }
  // The type the equation gives result `i`, for primitives whose IR takes the result's dtype
  // or shape from there (convert, reshape, broadcast_in_dim, constant, iota, random, load, arg).
  // An equation being built without one (makeEqn) reads an empty type and is refused after.
  const ir::Type &declared(size_t i = 0) const {
    static const ir::Type none{};
    if (i < e.outs.size()) return e.outs[i]->type;
    missingDeclared = true;
    return none;
  }
  mutable bool missingDeclared = false;

  bool fail(const std::string &msg) {
    why = msg;
    return false;
  }
  // A refusal a user's program can cause, pointing at operand `i` or at param `param`.
  bool failOperand(size_t i, DiagId id, const std::string &msg, const std::string &help) {
    badOperand = (int)i;
    diag = id;
    hint = help;
    return fail(msg);
  }
  bool failParam(const char *param, DiagId id, const std::string &msg, const std::string &help) {
    badParam = param;
    diag = id;
    hint = help;
    return fail(msg);
  }
  bool out(ir::DType dtype, std::vector<int64_t> shape) {
    outs.push_back(ir::Type{dtype, std::move(shape), 0});
    return true;
  }
  bool out(const ir::Type &t) { return out(t.dtype, t.shape); }

  // Params: false after fail() when missing or of another kind (IR's accessors would abort).
  bool param(const char *k, int64_t &v);
  bool param(const char *k, std::vector<int64_t> &v);
  bool param(const char *k, std::vector<ir::PartitionSpec> &v);
  bool flag(const char *k, bool &v);  // an int param 0 or 1
  // 0 <= a < n, else fail("`what` a out of range [0, n)").
  bool inRange(int64_t a, int64_t n, const std::string &what);
  // Operand `i` is an i32[] scalar (a start index, a seed, a loop index).
  bool i32Scalar(size_t i, const std::string &what);
  // The collective's `axes` param: distinct axes of f.mesh; `n` = the product of their sizes.
  bool groupSize(int64_t &n);
  // `global` split by `spec` over `mesh`: each dimension divided by the sizes of the axes
  // splitting it (axes of the mesh, each at most once, no longer than the rank, divisible).
  bool block(const ir::Type &global, const ir::PartitionSpec &spec, const ir::Mesh &mesh,
             const std::string &what, ir::Type &out);
  // A Func's params against types (dtype and shape): counts equal, each the same.
  bool paramsMatch(const ir::Func &body, const std::vector<const ir::Type *> &types, const std::string &what);
  // A Func's results against types likewise.
  bool resultsMatch(const ir::Func &body, const std::vector<const ir::Type *> &types, const std::string &what);
};

std::string typeText(const ir::Type &t);  // f32[3,4]
// The operand and result counts of Primitives.def against an equation's (results unchecked
// where not given: one being built); empty if they agree. Checked before a shape rule runs.
std::string arityProblem(ir::Prim p, size_t numIns, std::optional<size_t> numOuts);
bool isNumeric(ir::DType t);         // anything but bool
bool isBool(ir::DType t);
bool anyDType(ir::DType t);

// Shared shape rules.
bool sameAsFirstOperand(ShapeCtx &c);  // the result is typed as operand 0
// Gathering along `axis` over the group (all_gather, gather_to): tiled multiplies it by the
// group size n, untiled inserts a dimension of size n there. Scattering along `dimParam`
// (psum_scatter, pscatter, scatter_from): tiled divides it by n, untiled removes it (of size n).
bool gatherShape(ShapeCtx &c);
bool scatterShape(ShapeCtx &c, const char *dimParam);
// Element-wise: operands of one dtype (that `accepts`, else "needs `what` operands") and one
// shape; the result is typed as them (compare: bool of their shape).
bool elementwiseShape(ShapeCtx &c, bool (*accepts)(ir::DType), const char *what);
bool compareShape(ShapeCtx &c, bool (*accepts)(ir::DType), const char *what);
bool floatOperands(ShapeCtx &c);    // exp, log, ...: floats
bool numericOperands(ShapeCtx &c);  // add, neg, ...: not bool
bool boolOperands(ShapeCtx &c);     // and, or, not
bool compareAny(ShapeCtx &c);       // eq, ne
bool compareNumbers(ShapeCtx &c);   // lt, le, gt, ge
// A collective that keeps its operand's type (psum2, pbroadcast, ppermute, ...): valid axes.
bool collectiveSameShape(ShapeCtx &c, bool (*accepts)(ir::DType), const char *what);

// d *= k or d += k, false instead of a signed overflow (nested gathers of a large block).
inline bool scaleDim(int64_t &d, int64_t k) { return !__builtin_mul_overflow(d, k, &d); }
inline bool growDim(int64_t &d, int64_t k) { return !__builtin_add_overflow(d, k, &d); }

} // namespace shmapc::rules
