// Running the shape rules (shapeProblem, verifyModule), ShapeCtx's helpers, and the shape rules
// several primitives share.
#include "rules/Rules.h"
#include "rules/ShapeRules.h"

#include <set>

namespace shmapc::rules {

using namespace ir;

std::string typeText(const Type &t) { return typeToString(Type{t.dtype, t.shape, 0}, nullptr); }
bool isNumeric(DType t) { return t != DType::Bool; }
bool isBool(DType t) { return t == DType::Bool; }
bool anyDType(DType) { return true; }

std::string arityProblem(Prim p, size_t numIns, std::optional<size_t> numOuts) {
  const PrimInfo &info = primInfo(p);
  if (info.numIn >= 0 && numIns != (size_t)info.numIn)
    return "expects " + std::to_string(info.numIn) + " operand(s), has " + std::to_string(numIns);
  if (numOuts && info.numOut >= 0 && *numOuts != (size_t)info.numOut)
    return "expects " + std::to_string(info.numOut) + " result(s), has " + std::to_string(*numOuts);
  return "";
}

std::string shapeProblem(const Eqn &e, const Func &f) {
  for (const Value *v : e.ins)
    if (!v) return "null operand";
  for (const Value *v : e.outs)
    if (!v) return "null result";
  if (std::string why = arityProblem(e.prim, e.ins.size(), e.outs.size()); !why.empty()) return why;
  ShapeCtx c{e, f};
  if (!rulesOf(e.prim).shape(c)) return c.why.empty() ? "refused by its shape rule" : c.why;
  if (c.outs.size() != e.outs.size())
    return "has " + std::to_string(e.outs.size()) + " result(s), but its shape rule gives " +
           std::to_string(c.outs.size());
  for (size_t k = 0; k < c.outs.size(); ++k)
    if (!c.outs[k].sameShape(e.outs[k]->type))
      return "result " + std::to_string(k) + " is " + typeText(e.outs[k]->type) + ", but its shape rule gives " +
             typeText(c.outs[k]);
  return "";
}

std::vector<std::string> verifyModule(const Module &m) { return ir::verifyModule(m, shapeProblem); }

// ---- ShapeCtx

namespace {
template <typename T> const T *findParam(const Eqn &e, const char *k) {
  auto it = e.params.find(k);
  return it == e.params.end() ? nullptr : std::get_if<T>(&it->second);
}
} // namespace

bool ShapeCtx::param(const char *k, int64_t &v) {
  const int64_t *p = findParam<int64_t>(e, k);
  if (!p) return fail(std::string("needs an int param '") + k + "'");
  v = *p;
  return true;
}

bool ShapeCtx::param(const char *k, std::vector<int64_t> &v) {
  const auto *p = findParam<std::vector<int64_t>>(e, k);
  if (!p) return fail(std::string("needs an int list param '") + k + "'");
  v = *p;
  return true;
}

bool ShapeCtx::param(const char *k, std::vector<PartitionSpec> &v) {
  const auto *p = findParam<std::vector<PartitionSpec>>(e, k);
  if (!p) return fail(std::string("needs a partition spec list param '") + k + "'");
  v = *p;
  return true;
}

bool ShapeCtx::flag(const char *k, bool &v) {
  int64_t i = 0;
  if (!param(k, i)) return false;
  if (i != 0 && i != 1) return fail(std::string("param '") + k + "' is " + std::to_string(i) + ", not 0 or 1");
  v = i != 0;
  return true;
}

bool ShapeCtx::inRange(int64_t a, int64_t n, const std::string &what) {
  if (a >= 0 && a < n) return true;
  return fail(what + " " + std::to_string(a) + " is out of range [0, " + std::to_string(n) + ")");
}

bool ShapeCtx::i32Scalar(size_t i, const std::string &what) {
  if (in(i).dtype == DType::I32 && in(i).rank() == 0) return true;
  return fail(what + " must be an i32[] scalar, got " + typeText(in(i)));
}

bool ShapeCtx::groupSize(int64_t &n) {
  std::vector<int64_t> axes;
  if (!param("axes", axes)) return false;
  if (!f.mesh) return fail("a collective in a function without a mesh");
  n = 1;
  std::set<int64_t> seen;
  for (int64_t a : axes) {
    if (!inRange(a, (int64_t)f.mesh->axes.size(), "mesh axis")) return false;
    if (!seen.insert(a).second) return fail("mesh axis " + std::to_string(a) + " is listed twice in 'axes'");
    n *= f.mesh->sizes[a];
  }
  return true;
}

bool ShapeCtx::block(const Type &global, const PartitionSpec &spec, const Mesh &mesh, const std::string &what,
                     Type &out) {
  if ((int64_t)spec.dims.size() > global.rank())
    return fail(what + ": spec " + specToString(spec, mesh) + " is longer than the rank of " + typeText(global));
  out = global;
  std::set<int> seen;
  for (size_t d = 0; d < spec.dims.size(); ++d) {
    int64_t n = 1;
    for (int a : spec.dims[d]) {
      if (!inRange(a, (int64_t)mesh.axes.size(), what + ": mesh axis")) return false;
      if (!seen.insert(a).second) return fail(what + ": the spec names mesh axis " + mesh.axes[a] + " twice");
      n *= mesh.sizes[a];
    }
    if (global.shape[d] % n != 0)
      return fail(what + ": dimension " + std::to_string(d) + " of " + typeText(global) + " is not divisible by " +
                  std::to_string(n) + " (spec " + specToString(spec, mesh) + ")");
    out.shape[d] = global.shape[d] / n;
  }
  return true;
}

static bool typesMatch(ShapeCtx &c, const std::vector<Value *> &vals, const std::vector<const Type *> &types,
                       const std::string &what, const char *kind) {
  if (vals.size() != types.size())
    return c.fail(what + " has " + std::to_string(vals.size()) + " " + kind + "(s), expected " +
                  std::to_string(types.size()));
  for (size_t k = 0; k < vals.size(); ++k)
    if (!vals[k] || !vals[k]->type.sameShape(*types[k]))
      return c.fail(what + ": " + kind + " " + std::to_string(k) + " is " +
                    (vals[k] ? typeText(vals[k]->type) : std::string("null")) + ", expected " + typeText(*types[k]));
  return true;
}

bool ShapeCtx::paramsMatch(const Func &body, const std::vector<const Type *> &types, const std::string &what) {
  return typesMatch(*this, body.params, types, what, "param");
}

bool ShapeCtx::resultsMatch(const Func &body, const std::vector<const Type *> &types, const std::string &what) {
  return typesMatch(*this, body.results, types, what, "result");
}

// ---- shared rules

bool sameAsFirstOperand(ShapeCtx &c) {
  if (c.numIns() == 0) return c.fail("needs an operand");
  return c.out(c.in(0));
}

static bool sameOperands(ShapeCtx &c, bool (*accepts)(DType), const char *what) {
  if (c.numIns() == 0) return c.fail("needs an operand");
  const Type &first = c.in(0);
  if (!accepts(first.dtype)) return c.fail(std::string("needs ") + what + " operands, got " + typeText(first));
  for (size_t i = 1; i < c.numIns(); ++i)
    if (!c.in(i).sameShape(first))
      return c.fail("operand " + std::to_string(i) + " is " + typeText(c.in(i)) + ", operand 0 is " + typeText(first) +
                    " (element-wise operands have one dtype and one shape)");
  return true;
}

bool elementwiseShape(ShapeCtx &c, bool (*accepts)(DType), const char *what) {
  return sameOperands(c, accepts, what) && c.out(c.in(0));
}

bool compareShape(ShapeCtx &c, bool (*accepts)(DType), const char *what) {
  return sameOperands(c, accepts, what) && c.out(DType::Bool, c.in(0).shape);
}

bool floatOperands(ShapeCtx &c) { return elementwiseShape(c, isFloat, "float"); }
bool numericOperands(ShapeCtx &c) { return elementwiseShape(c, isNumeric, "numeric"); }
bool boolOperands(ShapeCtx &c) { return elementwiseShape(c, isBool, "bool"); }
bool compareAny(ShapeCtx &c) { return compareShape(c, anyDType, "any"); }
bool compareNumbers(ShapeCtx &c) { return compareShape(c, isNumeric, "numeric"); }

bool collectiveSameShape(ShapeCtx &c, bool (*accepts)(DType), const char *what) {
  int64_t n;
  if (!c.groupSize(n)) return false;
  if (!accepts(c.in(0).dtype)) return c.fail(std::string("needs a ") + what + " operand, got " + typeText(c.in(0)));
  return c.out(c.in(0));
}

// all_gather, all_gather_invariant: tiled multiplies dimension `axis` by the group size n;
// untiled inserts a dimension of size n at `axis` (0 <= axis <= rank).
bool gatherShape(ShapeCtx &c) {
  int64_t n, axis;
  bool tiled;
  if (!c.groupSize(n) || !c.param("axis", axis) || !c.flag("tiled", tiled)) return false;
  std::vector<int64_t> shape = c.in(0).shape;
  if (!c.inRange(axis, (int64_t)shape.size() + (tiled ? 0 : 1), "axis")) return false;
  if (!tiled) shape.insert(shape.begin() + axis, n);
  else if (!scaleDim(shape[axis], n)) return c.fail("the result's size overflows");
  return c.out(c.in(0).dtype, shape);
}

// psum_scatter (dimension param scatter_dimension), pscatter (axis): tiled divides the
// dimension by the group size n; untiled needs it of size n and removes it.
bool scatterShape(ShapeCtx &c, const char *dimParam) {
  int64_t n, dim;
  bool tiled;
  if (!c.groupSize(n) || !c.param(dimParam, dim) || !c.flag("tiled", tiled)) return false;
  std::vector<int64_t> shape = c.in(0).shape;
  if (!c.inRange(dim, (int64_t)shape.size(), dimParam)) return false;
  // (a user's error: sema reports it at the dimension's argument)
  const std::string name = primName(c.e.prim), of = typeText(c.in(0)), group = std::to_string(n);
  if (tiled && shape[dim] % n != 0)
    return c.failParam(dimParam, DiagId::NotDivisible,
                       name + " splits dimension " + std::to_string(dim) + " of " + of + " over " + group +
                           " device(s); " + std::to_string(shape[dim]) + " is not divisible by " + group,
                       "pad the array or scatter a different dimension");
  if (!tiled && shape[dim] != n)
    return c.failParam(dimParam, DiagId::ShapeMismatch,
                       name + " without tiling needs dimension " + std::to_string(dim) + " of size " + group +
                           " (the group size), but " + of + " has " + std::to_string(shape[dim]),
                       "pass tiled=true to split the dimension into n blocks");
  if (tiled) shape[dim] /= n;
  else shape.erase(shape.begin() + dim);
  return c.out(c.in(0).dtype, shape);
}

} // namespace shmapc::rules
