// Expression lowering: literals, names, operators, static indexing and call dispatch.
#include "sema/SemaImpl.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>

namespace shmapc::sema {

// A number written in the source (maybe negated): value and whether it was a float.
static std::optional<std::pair<double, bool>> staticNumber(const ast::Expr &e) {
  if (e.kind == ast::Expr::IntLit) return std::make_pair((double)e.intValue, false);
  if (e.kind == ast::Expr::FloatLit) return std::make_pair(e.floatValue, true);
  if (e.kind == ast::Expr::Unary && e.op == "-" && e.items.size() == 1)
    if (auto v = staticNumber(*e.items[0])) return std::make_pair(-v->first, v->second);
  return std::nullopt;
}

SVal Sema::eval(const ast::Expr &e) {
  switch (e.kind) {
  case ast::Expr::IntLit:
    return SVal::staticInteger(e.intValue, false, e.loc);
  case ast::Expr::FloatLit:
    return SVal::lit(e.floatValue, true, e.loc);
  case ast::Expr::BoolLit:
    return SVal::array(constant(ir::DType::Bool, {}, {e.boolValue ? 1.0 : 0.0}, e.loc), e.loc);
  case ast::Expr::StringLit:
    return SVal::axisNames({e.name}, e.loc);
  case ast::Expr::TupleLit: {
    // (a tuple of strings names mesh axes; any other tuple is a tuple of values)
    if (auto axes = staticAxesOpt(e)) return SVal::axisNames(*axes, e.loc);
    return evalTuple(e);
  }
  case ast::Expr::NoneLit:
    fail(DiagId::BadArgument, e.loc, "None is not a value",
         "None is only used in partition specs and indexing (x[None])");
  case ast::Expr::TypeArg:
    fail(DiagId::BadArgument, e.loc, "a type is not a value",
         "types are arguments of builtins such as zeros(f32[4]) or cast(x, f32)");
  case ast::Expr::ShardingLit:
    fail(DiagId::BadArgument, e.loc, "a sharding is not a value",
         "shardings are arguments of @jit(...) and of sharding_constraint(x, sharding<...>)");
  case ast::Expr::RecordLit:
    return evalRecord(e);
  case ast::Expr::Field:
    return field(eval(*e.items[0]), e.name, e.loc);
  case ast::Expr::Name:
    if (!e.module.empty())  // `p.w` of a record bound to p
      if (Scope *s = findScope(e.module); s && s->names[e.module].kind == SVal::Tuple)
        return imported(field(s->names[e.module], e.name, e.loc), s, e.loc);  // (the field alone captured)
    if (!e.module.empty() && arrayNamed(e.module)) {
      if (e.name == "ndim" || e.name == "size") return SVal::staticInteger(*staticIntOpt(e), false, e.loc);
      if (e.name == "shape")
        fail(DiagId::BadArgument, e.loc, e.module + ".shape is a list of static integers, not a value",
             "index it (" + e.module + ".shape[0]) or pass it where a shape is expected (reshape(y, " +
                 e.module + ".shape))");
      fail(DiagId::UnknownName, e.loc, e.module + " has no attribute " + e.name,
           e.name == "T" ? "transpose it with transpose(" + e.module + ")"
                         : "arrays have .shape[d], .ndim and .size");
    }
    if (!e.module.empty())
      fail(DiagId::UnknownName, e.loc, e.module + "." + e.name + " is not a value",
           "call module functions as " + e.module + "." + e.name + "(...)");
    return lookup(e.name, e.loc);
  case ast::Expr::ArrayLit:
    return evalArrayLit(e);
  case ast::Expr::Unary: {
    SVal a;
    bool evaluated = false;
    if (e.op == "-") {
      const ast::Expr &x = *e.items.at(0);
      if (auto v = staticOperand(x, a, evaluated))
        return SVal::staticInteger(checkedStatic(e, 0, *v, '-'), x.kind != ast::Expr::IntLit, e.loc);
    }
    if (!evaluated) a = eval(*e.items.at(0));
    return unaryOp(e.op, a, e.loc);
  }
  case ast::Expr::Binary: {
    SVal a, b;
    bool evaluatedA = false, evaluatedB = false;
    if (e.op == "+" || e.op == "-" || e.op == "*" || e.op == "//" || e.op == "%")
      if (auto x = staticOperand(*e.items.at(0), a, evaluatedA))
        if (auto y = staticOperand(*e.items.at(1), b, evaluatedB))
          return SVal::staticInteger(checkedStatic(e, *x, *y, e.op == "//" ? '/' : e.op[0]), true, e.loc);
    if (!evaluatedA) a = eval(*e.items.at(0));
    if (!evaluatedB) b = eval(*e.items.at(1));
    return binaryOp(e.op, a, b, e.loc);
  }
  case ast::Expr::Call: {
    std::vector<SVal> r = evalCall(e);
    if (r.size() != 1)
      fail(DiagId::ResultCount, e.loc,
           e.name + " returns " + std::to_string(r.size()) + " values where one is expected",
           r.empty() ? "call it as a statement: " + e.name + "(...);"
                     : "bind the results with let a, b = " + e.name + "(...);");
    return r[0];
  }
  case ast::Expr::Index:
    return evalIndex(e);
  }
  fail(DiagId::BadArgument, e.loc, "unsupported expression", "");
}

// + - * // % (and unary -) of static integers is a static integer (docs/language.md), folded
// here so that a name bound to one stays static (`let half = x.shape[0] // 2;`). The static
// integer operand `e` is, if it is one: a name is only looked up (a nested body must not
// capture a name it does not use); anything else is evaluated into `val` (`evaluated`), and a
// nested operation folds itself there, so a long chain is folded in linear time.
std::optional<int64_t> Sema::staticOperand(const ast::Expr &e, SVal &val, bool &evaluated) {
  if (e.kind == ast::Expr::Name && e.module.empty()) return staticIntOpt(e);
  val = eval(e);
  evaluated = true;
  if (val.kind == SVal::Literal) return val.isStaticInt ? std::optional<int64_t>(val.staticInt) : std::nullopt;
  if (val.kind == SVal::Array) return constantInt(val.value);  // axis_size(...)
  return std::nullopt;
}

std::vector<SVal> Sema::evalMulti(const ast::Expr &e) {
  if (e.kind == ast::Expr::Call) return evalCall(e);
  return {eval(e)};
}

ir::Value *Sema::evalArray(const ast::Expr &e) { return toArray(eval(e)); }

// ---- array literals

namespace {
struct LitCollector {
  std::vector<int64_t> shape;
  std::vector<double> values;
  bool anyFloat = false, anyBool = false, anyNumber = false;
};
} // namespace

SVal Sema::evalArrayLit(const ast::Expr &e) {
  LitCollector c;
  // Walks nested lists; the first element at each depth fixes that dimension's length.
  std::function<void(const ast::Expr &, size_t)> walk = [&](const ast::Expr &x, size_t depth) {
    if (x.kind == ast::Expr::ArrayLit) {
      if (x.items.empty())
        fail(DiagId::BadLiteral, x.loc, "empty array literal",
             "use zeros(T) for an array without values");
      if (depth == c.shape.size()) {
        if (!c.values.empty())
          fail(DiagId::BadLiteral, x.loc, "array literal is not rectangular",
               "give every row the same nesting depth and length");
        c.shape.push_back((int64_t)x.items.size());
      } else if (depth > c.shape.size() || c.shape[depth] != (int64_t)x.items.size()) {
        fail(DiagId::BadLiteral, x.loc,
             "array literal is not rectangular: a row has " + std::to_string(x.items.size()) +
                 " elements where " +
                 (depth < c.shape.size() ? std::to_string(c.shape[depth]) : "none") +
                 " were expected",
             "give every row the same length");
      }
      for (const auto &item : x.items) walk(*item, depth + 1);
      return;
    }
    if (depth != c.shape.size())
      fail(DiagId::BadLiteral, x.loc, "array literal is not rectangular",
           "give every row the same nesting depth");
    if (x.kind == ast::Expr::BoolLit) {
      c.anyBool = true;
      c.values.push_back(x.boolValue ? 1 : 0);
      return;
    }
    auto num = staticNumber(x);
    if (!num)
      fail(DiagId::BadLiteral, x.loc, "array literal elements must be numbers or booleans",
           "build arrays from computed values with concatenate or expand_dims");
    c.anyNumber = true;
    c.anyFloat |= num->second;
    c.values.push_back(num->first);
  };
  walk(e, 0);
  if (c.anyBool && c.anyNumber)
    fail(DiagId::BadLiteral, e.loc, "array literal mixes booleans and numbers",
         "use only numbers or only true/false");
  ir::DType dt = c.anyBool ? ir::DType::Bool : c.anyFloat ? ir::DType::F32 : ir::DType::I32;
  if (dt == ir::DType::I32)
    for (double v : c.values)
      if (v > INT32_MAX || v < INT32_MIN)
        fail(DiagId::BadLiteral, e.loc, "array literal element does not fit in i32",
             "use values between -2147483648 and 2147483647 (for larger i64 values, scale an "
             "i64 array: cast([3, 5], i64) * 1000000000), or float literals");
  return SVal::array(constant(dt, c.shape, c.values, e.loc), e.loc);
}

// ---- static indexing: x[1], x[1:3], x[::2], x[None], x[:, -1]

SVal Sema::evalIndex(const ast::Expr &e) {
  const ast::Expr &b0 = *e.items.at(0);
  if (b0.kind == ast::Expr::Name && b0.name == "shape" && !b0.module.empty() && arrayNamed(b0.module)) {
    auto d = staticIntOpt(e);
    if (!d)
      fail(DiagId::BadArgument, e.loc, b0.module + ".shape takes one static index", "write " + b0.module + ".shape[0]");
    return SVal::staticInteger(*d, false, e.loc);
  }
  SVal baseVal = eval(*e.items.at(0));
  if (baseVal.kind == SVal::Tuple) return tupleElement(baseVal, e);
  if (baseVal.kind != SVal::Array)
    fail(DiagId::BadArgument, e.loc, "cannot index " + describe(baseVal),
         "only arrays can be indexed");
  ir::Value *base = baseVal.value;
  const std::vector<int64_t> &shape = base->type.shape;
  int64_t rank = base->type.rank();
  int64_t used = 0;
  for (const ast::IndexItem &it : e.indices) used += it.kind != ast::IndexItem::NewAxis;
  if (used > rank)
    fail(DiagId::IndexOutOfRange, e.loc,
         "too many indices for " + str(base->type) + ": " + std::to_string(used) + " given",
         "index at most " + std::to_string(rank) + " dimension(s)");

  if (ir::Value *g = integerArrayIndex(e, base)) return SVal::array(g, e.loc);

  std::vector<int64_t> start(rank, 0), limit = shape, strides(rank, 1), sliced = shape;
  std::vector<int64_t> finalShape;
  int64_t dim = 0;
  for (const ast::IndexItem &it : e.indices) {
    if (it.kind == ast::IndexItem::NewAxis) {
      finalShape.push_back(1);
      continue;
    }
    int64_t n = shape[dim];
    if (it.kind == ast::IndexItem::Index) {
      int64_t i = staticInt(*it.index, "an index");
      if (i < -n || i >= n)
        fail(DiagId::IndexOutOfRange, it.loc,
             "index " + std::to_string(i) + " is out of range for dimension " +
                 std::to_string(dim) + " of size " + std::to_string(n) + " in " +
                 str(base->type),
             "use an index in [" + std::to_string(-n) + ", " + std::to_string(n - 1) +
                 "], or dynamic_slice for computed indices");
      if (i < 0) i += n;
      start[dim] = i;
      limit[dim] = i + 1;
      sliced[dim] = 1;
    } else {
      int64_t step = it.step ? staticInt(*it.step, "a slice step") : 1;
      if (step <= 0)
        fail(DiagId::BadArgument, it.loc, "slice step " + std::to_string(step) + " is not positive",
             "use a positive step (reversing is not supported)");
      auto clampPos = [n](int64_t v) { return std::min(n, std::max<int64_t>(0, v < 0 ? v + n : v)); };
      int64_t s = it.start ? clampPos(staticInt(*it.start, "a slice start")) : 0;
      int64_t t = it.stop ? clampPos(staticInt(*it.stop, "a slice stop")) : n;
      int64_t count = s < t ? (t - s - 1) / step + 1 : 0;  // no overflow for a huge step
      if (count == 0)
        fail(DiagId::IndexOutOfRange, it.loc,
             "slice selects no elements of dimension " + std::to_string(dim) + " of size " +
                 std::to_string(n),
             "empty arrays are not supported; check the slice bounds");
      start[dim] = s;
      limit[dim] = s + (count - 1) * step + 1;
      strides[dim] = step;
      sliced[dim] = count;
      finalShape.push_back(count);
    }
    ++dim;
  }
  for (; dim < rank; ++dim) finalShape.push_back(shape[dim]);

  ir::Value *v = base;
  bool strided = std::any_of(strides.begin(), strides.end(), [](int64_t s) { return s != 1; });
  if (sliced != shape || strided) {
    v = emitByRules(ir::Prim::Slice, {base}, {{"start", start}, {"limit", limit}, {"strides", strides}}, {e.loc});
  }
  return SVal::array(reshape(v, finalShape, e.loc), e.loc);
}

// `x[idx]` or `x[:, idx]` with one integer-array index and full slices elsewhere: numpy's
// take along that dimension. Null when every index is a static integer or a slice.
ir::Value *Sema::integerArrayIndex(const ast::Expr &e, ir::Value *base) {
  const ast::IndexItem *array = nullptr;
  int64_t dim = 0, arrayDim = 0;
  for (const ast::IndexItem &it : e.indices) {
    if (it.kind == ast::IndexItem::Index && !staticIntOpt(*it.index)) {
      if (array)
        fail(DiagId::BadArgument, it.loc, "only one integer-array index is supported",
             "index one dimension with an array at a time, e.g. take(take(x, i, axis=0), j, axis=1)");
      array = &it;
      arrayDim = dim;
    }
    dim += it.kind != ast::IndexItem::NewAxis;
  }
  if (!array) return nullptr;
  for (const ast::IndexItem &it : e.indices)
    if (&it != array && (it.kind != ast::IndexItem::Slice || it.start || it.stop || it.step))
      fail(DiagId::BadArgument, it.loc, "an integer-array index combines only with full slices (:)",
           "index with the array first, then slice the result");
  return gatherAlong(base, indexArray(*array->index, "array indices"), arrayDim, e.loc);
}

// ---- calls: user functions first (they may shadow builtins), then the builtins table

std::vector<SVal> Sema::evalCall(const ast::Expr &e) {
  if (e.callee) return evalApply(e);
  const Unit *unit = nullptr;
  if (const ast::FuncDecl *decl = findFunction(e, unit)) return callFunction(*decl, *unit, e);
  rejectUnappliedTransform(e);
  if (auto m = multiResultBuiltins().find(e.name); m != multiResultBuiltins().end())
    return (this->*(m->second))(e);
  auto it = builtins().find(e.name);
  if (it != builtins().end()) return {(this->*(it->second))(e)};
  // The compiler's own cast from varying to invariant, sound only where it puts it (the pieces
  // of a joined gradient sum): a program cannot declare its values equal across devices.
  if (e.name == ir::primName(ir::Prim::InvariantCast))
    fail(DiagId::UnknownFunction, e.loc,
         e.name + " is internal to the compiler (its cast of values known equal across devices), "
                  "not a function a program can call",
         "make a varying value invariant with a collective: psum, pmean or all_gather_invariant");
  std::vector<std::string> names;
  for (const auto &[n, f] : cur_->unit->funcs) names.push_back(n);
  for (const auto &[n, f] : builtins()) names.push_back(n);
  for (const auto &[n, f] : multiResultBuiltins()) names.push_back(n);
  std::string near = closestName(e.name, names);
  fail(DiagId::UnknownFunction, e.loc, "unknown function " + e.name,
       near.empty() ? "define it with def " + e.name + "(...) { ... }"
                    : "did you mean " + near + "?");
}

} // namespace shmapc::sema
