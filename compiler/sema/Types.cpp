// Types, weakly typed literals, numpy broadcasting and element-wise operators. Every
// element-wise eqn gets operands of identical shape: broadcasting is made explicit with
// broadcast_in_dim, and a literal operand becomes a splat constant of the result shape.
#include "sema/SemaImpl.h"

#include "rules/Rules.h"

#include <cmath>
#include <cstdint>

namespace shmapc::sema {

std::string Sema::str(const ir::Type &t) { return ir::typeToString(t, nullptr); }

static std::string formatNumber(double v, bool isFloat) {
  // An integer literal is held as a double; one beyond int64 (constant folding) is printed as
  // such, never converted.
  if (!isFloat && std::fabs(v) < 9.2e18) return std::to_string((int64_t)v);
  if (!isFloat) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string Sema::describe(const SVal &v) {
  switch (v.kind) {
  case SVal::Array:
    return str(v.value->type);
  case SVal::Tuple:
    return treeText(v.keys, v.items.size());
  case SVal::Literal:
    // Literals are held as doubles: an integer beyond 2^53 would print rounded
    // (9223372036854775807 as ...808), so it is described by its magnitude instead.
    if (!v.literalIsFloat && std::fabs(v.literal) >= 9007199254740992.0)
      return std::string("int literal ") + (v.literal < 0 ? "below -2^53" : "beyond 2^53");
    return (v.literalIsFloat ? "float literal " : "int literal ") +
           formatNumber(v.literal, v.literalIsFloat);
  case SVal::Axes: {
    std::string s = "(";
    for (size_t i = 0; i < v.axes.size(); ++i) s += (i ? ", \"" : "\"") + v.axes[i] + "\"";
    return s + ")";
  }
  }
  return "?";
}

ir::Type Sema::typeOf(const ast::TypeExpr &t) {
  ir::Type out;
  switch (t.dtype) {
  case ast::DTypeName::F32: out.dtype = ir::DType::F32; break;
  case ast::DTypeName::F64: out.dtype = ir::DType::F64; break;
  case ast::DTypeName::I32: out.dtype = ir::DType::I32; break;
  case ast::DTypeName::Bool: out.dtype = ir::DType::Bool; break;
  case ast::DTypeName::I64: out.dtype = ir::DType::I64; break;
  case ast::DTypeName::F16: out.dtype = ir::DType::F16; break;
  case ast::DTypeName::BF16: out.dtype = ir::DType::BF16; break;
  }
  out.shape = t.shape;
  for (size_t i = 0; i < t.dims.size(); ++i)
    if (t.dims[i]) out.shape[i] = staticInt(*t.dims[i], "a dimension");
  for (int64_t d : out.shape)
    if (d <= 0)
      fail(DiagId::BadArgument, t.loc, "dimension " + std::to_string(d) + " in a type",
           "array dimensions must be positive");
  if (out.rank() > SHM_MAX_RANK)
    fail(DiagId::ArrayTooLarge, t.loc,
         "type " + str(out) + " has rank " + std::to_string(out.rank()) + "; at most " +
             std::to_string(SHM_MAX_RANK) + " dimensions are supported",
         "merge dimensions with reshape");
  if (out.numElements() > SHM_MAX_ELEMENTS)
    fail(DiagId::ArrayTooLarge, t.loc,
         "type " + str(out) + " has more than 2^40 elements, the most one array may have",
         "use a smaller shape; split the data over a mesh or over several arrays");
  return out;
}

ir::Value *Sema::emit(ir::Prim p, std::vector<ir::Value *> ins, const ir::Type &out, Loc loc,
                      Params params) {
  // (typed by the rules, which check sema's own type for the result: a mismatch is an internal
  // error naming the rule's reason)
  ir::Eqn &e = pushEqn(rules::makeEqn(*cur_->func, p, std::move(ins), std::move(params), loc,
                                      {.declared = &out, .untyped = true}),
                       /*check=*/false);
  return e.outs[0];
}

ir::Value *Sema::emitByRules(ir::Prim p, std::vector<ir::Value *> ins, Params params, const ArgLocs &at) {
  ir::Eqn made;
  rules::Refusal refused;
  if (!rules::tryMakeEqn(*cur_->func, p, std::move(ins), std::move(params), at.call, {.untyped = true}, made,
                         refused)) {
    if (!refused.diag)  // (no program causes it: sema passed the rule something ill-formed)
      throw InternalError("sema built an ill-typed " + std::string(ir::primName(p)) + " in @" + cur_->func->name +
                          ": " + refused.why);
    Loc loc = at.call;
    if (refused.operand >= 0 && (size_t)refused.operand < at.operands.size()) loc = at.operands[refused.operand];
    if (refused.param)
      if (auto it = at.params.find(refused.param); it != at.params.end()) loc = it->second;
    fail(*refused.diag, loc, refused.why, refused.hint);
  }
  return pushEqn(std::move(made), /*check=*/false).outs[0];
}

ir::Eqn &Sema::pushEqn(ir::Eqn e, bool check) {
  if (check) checkShapeRule(e);
  if (e.prim == ir::Prim::Constant && e.outs.size() == 1 && e.outs[0]->type.dtype == ir::DType::I32 &&
      e.outs[0]->type.rank() == 0)
    intConstants_[e.outs[0]] = {cur_->func, cur_->func->eqns.size()};
  cur_->func->eqns.push_back(std::move(e));
  return cur_->func->eqns.back();
}

// Always on: a shape rule costs a few comparisons per equation (well under 1% of a compile).
void Sema::checkShapeRule(const ir::Eqn &e) {
  std::string why = rules::shapeProblem(e, *cur_->func);
  if (why.empty()) return;
  throw InternalError("sema built an ill-typed " + std::string(ir::primName(e.prim)) + " in @" + cur_->func->name +
                      " (line " + std::to_string(e.loc.line) + ", column " + std::to_string(e.loc.col) + "): " + why);
}

ir::Value *Sema::constant(ir::DType dt, std::vector<int64_t> shape, std::vector<double> vals,
                          Loc loc) {
  ir::Type t;
  t.dtype = dt;
  t.shape = std::move(shape);
  return emit(ir::Prim::Constant, {}, t, loc, {{"value", std::move(vals)}});
}

// Materializes a weakly typed literal with the dtype its context chose (a splat of `shape`).
ir::Value *Sema::literalAs(const SVal &lit, ir::DType dt, const std::vector<int64_t> &shape,
                           Loc loc) {
  if (lit.kind != SVal::Literal) return broadcastTo(toArray(lit), shape, loc);
  std::string what = describe(lit);
  if (lit.literalIsFloat && !ir::isFloat(dt))
    fail(DiagId::DTypeMismatch, lit.loc, "cannot use " + what + " as " + ir::dtypeName(dt),
         ir::isInt(dt) ? "write an integer, or cast the other operand to a float type"
                       : "use true or false");
  if (dt == ir::DType::Bool)
    fail(DiagId::DTypeMismatch, lit.loc, "cannot use " + what + " as bool",
         "use true or false, or compare, e.g. x != 0");
  // Static integer arithmetic is exact (as Python's on x.shape[0]); its result must fit the
  // dtype it becomes, or it would wrap where JAX refuses ("Python int too large").
  if (lit.computed && lit.isStaticInt &&
      (dt == ir::DType::I32 ? lit.staticInt > INT32_MAX || lit.staticInt < INT32_MIN
                            : dt == ir::DType::I64 && (lit.staticInt >= (int64_t(1) << 53) ||
                                                       lit.staticInt <= -(int64_t(1) << 53))))
    fail(DiagId::StaticIntOverflow, lit.loc,
         "static integer arithmetic gives " + std::to_string(lit.staticInt) + ", which does not fit in " +
             ir::dtypeName(dt) + (dt == ir::DType::I64 ? " exactly (an i64 literal must lie strictly between -2^53 and 2^53)" : ""),
         dt == ir::DType::I32
             ? "it is exact at compile time and used as an i32 value here; use smaller values, or compute in "
               "i64 (cast(x.shape[0], i64) * x.shape[0])"
             : "build larger values with i64 arithmetic, e.g. cast(x.shape[0], i64) * x.shape[0]");
  if (dt == ir::DType::I32 && (lit.literal > INT32_MAX || lit.literal < INT32_MIN))
    fail(DiagId::BadLiteral, lit.loc, what + " does not fit in i32",
         "use a value between -2147483648 and 2147483647, or make the other operand i64 "
         "(cast(x, i64))");
  // Literals are held as doubles (as constants are): integers are exact below 2^53; from 2^53
  // on, the double may be the rounding of another integer (9007199254740993 reads as 2^53).
  if (dt == ir::DType::I64 && std::fabs(lit.literal) >= 9007199254740992.0)
    fail(DiagId::BadLiteral, lit.loc,
         "an int literal of 2^53 (9007199254740992) or more in magnitude is not exact: this one "
         "reads as " + formatNumber(lit.literal, false) + "; i64 literals must lie strictly between -2^53 and 2^53",
         "build larger values with i64 arithmetic, e.g. cast(1073741824, i64) * 8589934592");
  return constant(dt, shape, {lit.literal}, loc);
}

ir::Value *Sema::toArray(const SVal &v) {
  if (v.kind == SVal::Array) return v.value;
  if (v.kind == SVal::Literal)
    return literalAs(v, v.literalIsFloat ? ir::DType::F32 : ir::DType::I32, {}, v.loc);
  if (v.kind == SVal::Tuple)
    fail(DiagId::BadArgument, v.loc, describe(v) + " is not an array",
         v.keys.empty() ? "take one of its elements (t[0]), or pass the tuple to a function that takes it"
                        : "read one of its fields (r." + v.keys[0] + "), or pass the record to a function that takes it");
  fail(DiagId::BadArgument, v.loc, "the axis names " + describe(v) + " are not an array",
       "axis names are only arguments of collectives and of functions that pass them on");
}

bool broadcastsTo(const std::vector<int64_t> &from, const std::vector<int64_t> &to) {
  if (from.size() > to.size()) return false;
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[offset + i]) return false;
  return true;
}

// Callers check that v's shape broadcasts to `shape` with their own message; the check here is
// the last line of defence, so a caller that forgot gives a located error, not an ill-typed eqn.
ir::Value *Sema::broadcastTo(ir::Value *v, const std::vector<int64_t> &shape, Loc loc) {
  if (v->type.shape == shape) return v;
  int64_t offset = (int64_t)shape.size() - v->type.rank();
  if (!broadcastsTo(v->type.shape, shape)) {
    ir::Type t = v->type;
    t.shape = shape;
    fail(DiagId::ShapeMismatch, loc, "cannot broadcast " + str(v->type) + " to " + str(t),
         "trailing dimensions must be equal or 1; reshape, slice or expand_dims the operand");
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < v->type.rank(); ++i) dims.push_back(offset + i);
  ir::Type t = v->type;
  t.shape = shape;
  return emit(ir::Prim::BroadcastInDim, {v}, t, loc, {{"broadcast_dimensions", dims}});
}

ir::Value *Sema::convert(ir::Value *v, ir::DType dt, Loc loc) {
  if (v->type.dtype == dt) return v;
  ir::Type t = v->type;
  t.dtype = dt;
  return emit(ir::Prim::Convert, {v}, t, loc);
}

ir::Value *Sema::reshape(ir::Value *v, const std::vector<int64_t> &shape, Loc loc) {
  if (v->type.shape == shape) return v;
  ir::Type t = v->type;
  t.shape = shape;
  return emit(ir::Prim::Reshape, {v}, t, loc);
}

// JAX's type promotion lattice for the dtypes the language has:
//   i32 < i64 < {f16, bf16} < f32 < f64
// i.e. two integers give the wider; an integer and a float give the float (i64 + f16 is f16,
// as in JAX); two floats give the wider, and f16 with bf16 (neither holds the other) gives f32.
// Literals are weakly typed: they adopt the arrays' dtype, except that a float literal lifts
// an integer to a float: i32 to f32 (JAX's default float with x64 off, where i32 is the
// default integer) and i64 to f64 (JAX's default float with x64 on). With no array operand a
// float literal makes the result f32, otherwise i32. bool does not mix with numbers (JAX
// would promote it; here a cast or a select says what is meant).
ir::DType promoteDTypes(ir::DType a, ir::DType b) {
  using D = ir::DType;
  if (a == b) return a;
  if (ir::isInt(a) && ir::isInt(b)) return D::I64;
  if (ir::isInt(a)) return b;
  if (ir::isInt(b)) return a;
  if (a == D::F64 || b == D::F64) return D::F64;
  return D::F32;  // f32 with a half type, or f16 with bf16
}

// The float a float literal (or true division, or mean) lifts an integer to.
ir::DType floatFor(ir::DType dt) {
  if (dt == ir::DType::I32) return ir::DType::F32;
  if (dt == ir::DType::I64) return ir::DType::F64;
  return dt;
}

ir::DType Sema::commonDType(const std::vector<SVal> &ops, const std::string &what, Loc loc) {
  const SVal *widest = nullptr, *boolArray = nullptr, *number = nullptr;
  ir::DType common = ir::DType::Bool;
  bool floatLiteral = false;
  for (const SVal &o : ops) {
    if (o.kind == SVal::Axes || o.kind == SVal::Tuple) toArray(o);  // reports the error
    const SVal *&slot = o.kind == SVal::Array && o.value->type.dtype == ir::DType::Bool
                            ? boolArray : number;
    if (!slot) slot = &o;
    if (o.kind == SVal::Literal) {
      floatLiteral |= o.literalIsFloat;
    } else if (o.value->type.dtype != ir::DType::Bool) {
      common = widest ? promoteDTypes(common, o.value->type.dtype) : o.value->type.dtype;
      widest = &o;
    }
  }
  if (boolArray && number) {
    bool boolFirst = boolArray < number;  // ops is a vector: addresses follow the source order
    const SVal &first = boolFirst ? *boolArray : *number, &second = boolFirst ? *number : *boolArray;
    fail(DiagId::DTypeMismatch, loc,
         "cannot " + what + " " + describe(first) + " and " + describe(second) +
             ": bool does not mix with numbers",
         number->kind == SVal::Literal ? "use true/false, or cast the bool array, e.g. cast(b, i32)"
                                       : "cast the bool operand, e.g. cast(b, f32), or choose "
                                         "with select(b, x, y)");
  }
  if (!widest) return boolArray ? ir::DType::Bool : floatLiteral ? ir::DType::F32 : ir::DType::I32;
  return floatLiteral ? floatFor(common) : common;
}

// numpy broadcasting: align trailing dimensions; a dimension of size 1 stretches.
std::vector<int64_t> Sema::broadcastShape(const std::vector<SVal> &ops, const std::string &what,
                                          Loc loc) {
  std::vector<int64_t> out;
  const SVal *outFrom = nullptr;
  for (const SVal &o : ops) {
    if (o.kind != SVal::Array) continue;
    const std::vector<int64_t> &s = o.value->type.shape;
    std::vector<int64_t> merged(std::max(out.size(), s.size()), 1);
    for (size_t i = 0; i < merged.size(); ++i) {
      int64_t a = i < out.size() ? out[out.size() - 1 - i] : 1;
      int64_t b = i < s.size() ? s[s.size() - 1 - i] : 1;
      if (a != b && a != 1 && b != 1)
        fail(DiagId::ShapeMismatch, loc,
             "cannot " + what + " " + describe(*outFrom) + " and " + describe(o) +
                 ": shapes do not broadcast",
             "trailing dimensions must be equal or 1; reshape, slice or expand_dims an "
             "operand");
      merged[merged.size() - 1 - i] = a == 1 ? b : a;
    }
    out = merged;
    if (!outFrom || s.size() >= outFrom->value->type.shape.size()) outFrom = &o;
  }
  return out;
}

// One operand of an element-wise eqn: a literal materialized in dtype `dt`, or an array
// converted to `dt` (promotion) and broadcast to `shape`.
ir::Value *Sema::asOperand(const SVal &o, ir::DType dt, const std::vector<int64_t> &shape,
                           Loc loc) {
  if (o.kind == SVal::Literal) return literalAs(o, dt, shape, o.loc);
  return broadcastTo(convert(o.value, dt, loc), shape, loc);
}

// The operands as arrays of one dtype and one shape, ready for an element-wise eqn. `inexact`
// promotes integers to floats, as JAX's true division does (int32 / int32 is float32; int64 /
// int64 is float64, as with x64 on).
std::vector<ir::Value *> Sema::unify(const std::vector<SVal> &ops, const std::string &what,
                                     Loc loc, bool inexact) {
  ir::DType dt = commonDType(ops, what, loc);
  if (inexact) dt = floatFor(dt);
  std::vector<int64_t> shape = broadcastShape(ops, what, loc);
  std::vector<ir::Value *> out;
  for (const SVal &o : ops) out.push_back(asOperand(o, dt, shape, loc));
  return out;
}

namespace {
enum class Operands { Numeric, Bool, Any };
struct BinaryRule {
  ir::Prim prim;
  const char *verb;   // "cannot <verb> A and B"
  Operands operands;
  bool compare;       // result is bool
};
const std::map<std::string, BinaryRule> &binaryRules() {
  static const std::map<std::string, BinaryRule> rules = {
      {"+", {ir::Prim::Add, "add", Operands::Numeric, false}},
      {"-", {ir::Prim::Sub, "subtract", Operands::Numeric, false}},
      {"*", {ir::Prim::Mul, "multiply", Operands::Numeric, false}},
      {"/", {ir::Prim::Div, "divide", Operands::Numeric, false}},  // true division
      {"//", {ir::Prim::FloorDiv, "floor-divide", Operands::Numeric, false}},
      {"%", {ir::Prim::Rem, "take the remainder of", Operands::Numeric, false}},
      {"==", {ir::Prim::Eq, "compare", Operands::Any, true}},
      {"!=", {ir::Prim::Ne, "compare", Operands::Any, true}},
      {"<", {ir::Prim::Lt, "compare", Operands::Numeric, true}},
      {"<=", {ir::Prim::Le, "compare", Operands::Numeric, true}},
      {">", {ir::Prim::Gt, "compare", Operands::Numeric, true}},
      {">=", {ir::Prim::Ge, "compare", Operands::Numeric, true}},
      {"&&", {ir::Prim::And, "apply && to", Operands::Bool, false}},
      {"||", {ir::Prim::Or, "apply || to", Operands::Bool, false}},
  };
  return rules;
}
} // namespace

SVal Sema::binaryOp(const std::string &op, const SVal &a, const SVal &b, Loc loc) {
  if (op == "@") return matmul(a, b, loc);
  if (op == "**") return elementwise(ir::Prim::Pow, "raise to a power", a, b, loc);
  auto it = binaryRules().find(op);
  if (it == binaryRules().end())
    fail(DiagId::BadArgument, loc, "unknown operator " + op, "");
  const BinaryRule &r = it->second;
  std::vector<ir::Value *> v = unify({a, b}, r.verb, loc, /*inexact=*/op == "/");
  ir::DType dt = v[0]->type.dtype;
  bool isBool = dt == ir::DType::Bool;
  if (r.operands == Operands::Numeric && isBool)
    fail(DiagId::DTypeMismatch, loc,
         std::string("cannot ") + r.verb + " " + str(v[0]->type) + " and " + str(v[1]->type) +
             ": " + op + " needs numbers",
         "cast the operands, e.g. cast(x, i32)");
  if (r.operands == Operands::Bool && !isBool)
    fail(DiagId::DTypeMismatch, loc,
         std::string("cannot ") + r.verb + " " + str(v[0]->type) + " and " + str(v[1]->type) +
             ": " + op + " needs bool operands",
         "compare the operands first, e.g. x > 0");
  ir::Type t = v[0]->type;
  if (r.compare) t.dtype = ir::DType::Bool;
  return SVal::array(emit(r.prim, v, t, loc), loc);
}

// maximum / minimum / pow: binary numeric element-wise builtins.
SVal Sema::elementwise(ir::Prim p, const std::string &what, const SVal &a, const SVal &b,
                       Loc loc) {
  std::vector<ir::Value *> v = unify({a, b}, "apply " + what + " to", loc);
  if (v[0]->type.dtype == ir::DType::Bool)
    fail(DiagId::DTypeMismatch, loc, what + " needs numbers, got " + str(v[0]->type),
         "cast(x, i32) or cast(x, f32) first");
  return SVal::array(emit(p, v, v[0]->type, loc), loc);
}

SVal Sema::unaryOp(const std::string &op, const SVal &a, Loc loc) {
  if (op == "-") {
    if (a.kind == SVal::Literal) return SVal::lit(-a.literal, a.literalIsFloat, loc);
    ir::Value *v = toArray(a);
    if (v->type.dtype == ir::DType::Bool)
      fail(DiagId::DTypeMismatch, loc, "cannot negate " + str(v->type),
           "use ! for bool values");
    return SVal::array(emit(ir::Prim::Neg, {v}, v->type, loc), loc);
  }
  if (op == "!") {
    ir::Value *v = toArray(a);
    if (v->type.dtype != ir::DType::Bool)
      fail(DiagId::DTypeMismatch, loc, "! needs a bool value, got " + describe(a),
           "compare first, e.g. !(x > 0), or use - to negate numbers");
    return SVal::array(emit(ir::Prim::Not, {v}, v->type, loc), loc);
  }
  fail(DiagId::BadArgument, loc, "unknown operator " + op, "");
}

} // namespace shmapc::sema
