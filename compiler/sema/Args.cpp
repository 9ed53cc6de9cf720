// Builtin call arguments: binding positional and keyword arguments to parameter names, and
// reading the static ones (integers, axis lists, types, booleans) from the syntax tree.
#include "sema/SemaImpl.h"

#include <cmath>

#include <algorithm>

namespace shmapc::sema {

static std::string signature(const std::string &fn, const std::vector<std::string> &names,
                             size_t required) {
  std::string s = fn + "(";
  for (size_t i = 0; i < names.size(); ++i)
    s += (i ? ", " : "") + names[i] + (i >= required ? "=..." : "");
  return s + ")";
}

// Returns one entry per name in `names` (null when not passed). The first `required` names
// must be passed, positionally or by keyword.
std::vector<const ast::Expr *> Sema::bindArgs(const ast::Expr &call,
                                              const std::vector<std::string> &names,
                                              size_t required) {
  std::string sig = signature(call.name, names, required);
  if (call.items.size() > names.size())
    fail(DiagId::ArgCount, call.loc,
         call.name + " takes at most " + std::to_string(names.size()) + " argument(s) but " +
             std::to_string(call.items.size()) + " were given",
         "call it as " + sig);
  std::vector<const ast::Expr *> out(names.size(), nullptr);
  for (size_t i = 0; i < call.items.size(); ++i) out[i] = call.items[i].get();
  for (const ast::Expr::KwArg &kw : call.kwargs) {
    auto it = std::find(names.begin(), names.end(), kw.name);
    if (it == names.end())
      fail(DiagId::BadArgument, kw.loc, call.name + " has no argument named " + kw.name,
           "call it as " + sig);
    size_t i = it - names.begin();
    if (out[i])
      fail(DiagId::BadArgument, kw.loc, "argument " + kw.name + " of " + call.name +
                                            " is passed twice",
           "pass it once");
    out[i] = kw.value.get();
  }
  for (size_t i = 0; i < required; ++i)
    if (!out[i])
      fail(DiagId::ArgCount, call.loc, call.name + " is missing its argument " + names[i],
           "call it as " + sig);
  return out;
}

// A static integer: a literal, x.ndim, x.size, x.shape[d], axis_size(axes) in a shmap body, and
// + - * // % of static integers (floor division and remainder, as numpy's).
std::optional<int64_t> Sema::staticIntOpt(const ast::Expr &e) {
  switch (e.kind) {
  case ast::Expr::IntLit: return e.intValue;
  case ast::Expr::Unary:
    if (e.op != "-" || e.items.size() != 1) return std::nullopt;
    if (auto v = staticIntOpt(*e.items[0])) return checkedStatic(e, 0, *v, '-');
    return std::nullopt;
  case ast::Expr::Name:
    if ((e.name == "ndim" || e.name == "size") && !e.module.empty())
      if (const ir::Value *v = arrayNamed(e.module))
        return e.name == "ndim" ? v->type.rank() : v->type.numElements();
    if (e.module.empty())  // a name bound to a static integer: `let n = x.shape[0];`
      if (const ir::Value *v = arrayNamed(e.name)) return constantInt(v);
    return std::nullopt;
  case ast::Expr::Index: {  // x.shape[d]
    const ast::Expr &base = *e.items.at(0);
    if (base.kind != ast::Expr::Name || base.name != "shape" || base.module.empty()) return std::nullopt;
    const ir::Value *v = arrayNamed(base.module);
    if (!v || e.indices.size() != 1 || e.indices[0].kind != ast::IndexItem::Index) return std::nullopt;
    auto d = staticIntOpt(*e.indices[0].index);
    if (!d) return std::nullopt;
    return v->type.shape[normAxis(*d, v->type.rank(), e.indices[0].loc, "dimension of " + base.module + ".shape")];
  }
  case ast::Expr::Binary: {
    if (e.op != "+" && e.op != "-" && e.op != "*" && e.op != "//" && e.op != "%") return std::nullopt;
    auto a = staticIntOpt(*e.items.at(0));
    auto b = a ? staticIntOpt(*e.items.at(1)) : std::nullopt;
    if (!b) return std::nullopt;
    return checkedStatic(e, *a, *b, e.op == "//" ? '/' : e.op[0]);
  }
  case ast::Expr::Call:
    if (e.name == "axis_size" && e.module.empty() && !e.callee && cur_ && cur_->mesh &&
        !cur_->unit->funcs.count("axis_size")) {
      auto a = bindArgs(e, {"axes"}, 1);
      int64_t n = 1;
      resolveAxes(*a[0], e.name, e.loc, &n);
      return n;
    }
    return std::nullopt;
  default: return std::nullopt;
  }
}

// a op b on static integers; overflow and division by zero are located errors.
int64_t Sema::checkedStatic(const ast::Expr &e, int64_t a, int64_t b, char op) {
  int64_t r = 0;
  bool overflow = false;
  switch (op) {
  case '+': overflow = __builtin_add_overflow(a, b, &r); break;
  case '-': overflow = __builtin_sub_overflow(a, b, &r); break;
  case '*': overflow = __builtin_mul_overflow(a, b, &r); break;
  case '/':
  case '%':
    if (b == 0) fail(DiagId::BadArgument, e.loc, "static integer division by zero", "divide by a nonzero value");
    if (a == INT64_MIN && b == -1) {
      overflow = op == '/';
      break;
    }
    r = op == '/' ? a / b - ((a % b != 0) && ((a < 0) != (b < 0))) : ((a % b) + b) % b;
    break;
  }
  if (overflow)
    fail(DiagId::BadArgument, e.loc, "static integer arithmetic overflows int64", "use smaller values");
  return r;
}

// The value of an integer scalar constant made in the function being built (or one it is
// nested in), e.g. a static integer bound by `let`.
std::optional<int64_t> Sema::constantInt(const ir::Value *v) {
  auto it = intConstants_.find(v);
  if (it == intConstants_.end()) return std::nullopt;
  const auto [func, index] = it->second;
  for (FuncCtx *c = cur_; c; c = c->parent) {
    if (c->func != func) continue;
    // The equation is read back (the index records where, not what), so a stale entry can
    // only miss.
    if (index >= c->func->eqns.size()) return std::nullopt;
    const ir::Eqn &e = c->func->eqns[index];
    if (e.prim != ir::Prim::Constant || e.outs[0] != v) return std::nullopt;
    const std::vector<double> &values = e.doublesParam("value");
    if (values.size() == 1 && std::fabs(values[0]) <= 2147483648.0) return (int64_t)values[0];
    return std::nullopt;
  }
  return std::nullopt;
}

// The array a name in scope holds, or null.
const ir::Value *Sema::arrayNamed(const std::string &name) {
  Scope *s = findScope(name);
  if (!s) return nullptr;
  const SVal &v = s->names[name];
  return v.kind == SVal::Array ? v.value : nullptr;
}

int64_t Sema::staticInt(const ast::Expr &e, const std::string &what) {
  if (auto v = staticIntOpt(e)) return *v;
  fail(DiagId::BadArgument, e.loc, what + " must be a static integer",
       "it must be known at compile time: a literal, x.shape[d], x.ndim, axis_size(...), "
       "+ - * // % of those, or a name bound to one (let half = x.shape[0] // 2;)");
}

// `1`, `[1, 2]` or `(1, 2)`.
std::vector<int64_t> Sema::staticIntList(const ast::Expr &e, const std::string &what) {
  if (e.kind == ast::Expr::Name && e.name == "shape" && !e.module.empty())  // x.shape
    if (const ir::Value *v = arrayNamed(e.module)) return v->type.shape;
  if (e.kind == ast::Expr::ArrayLit || e.kind == ast::Expr::TupleLit) {
    std::vector<int64_t> out;
    for (const auto &item : e.items) out.push_back(staticInt(*item, "each entry of " + what));
    return out;
  }
  return {staticInt(e, what)};
}

bool Sema::staticBool(const ast::Expr &e, const std::string &what) {
  if (e.kind == ast::Expr::BoolLit) return e.boolValue;
  fail(DiagId::BadArgument, e.loc, what + " must be true or false", "write true or false");
}

ir::Type Sema::typeArg(const ast::Expr &e, const std::string &what) {
  if (e.kind == ast::Expr::TypeArg && e.type) return typeOf(*e.type);
  fail(DiagId::BadArgument, e.loc, what + " must be a type", "write a type such as f32[4,2]");
}

// `f64` (a type without a shape, or a bare name).
ir::DType Sema::dtypeArg(const ast::Expr &e, const std::string &what) {
  if (e.kind == ast::Expr::TypeArg && e.type) return typeOf(*e.type).dtype;
  if (e.kind == ast::Expr::Name && e.module.empty()) {
    if (e.name == "f32") return ir::DType::F32;
    if (e.name == "f64") return ir::DType::F64;
    if (e.name == "i32") return ir::DType::I32;
    if (e.name == "bool") return ir::DType::Bool;
    if (e.name == "i64") return ir::DType::I64;
    if (e.name == "f16") return ir::DType::F16;
    if (e.name == "bf16") return ir::DType::BF16;
  }
  fail(DiagId::BadArgument, e.loc, what + " must be a dtype", "write f32, f64, f16, bf16, i32, i64 or bool");
}

int64_t Sema::normAxis(int64_t axis, int64_t rank, Loc loc, const std::string &what) {
  if (axis < -rank || axis >= rank)
    fail(DiagId::BadAxis, loc,
         what + " " + std::to_string(axis) + " is out of range for rank " +
             std::to_string(rank),
         rank == 0 ? "a scalar has no axes"
                   : "use an axis in [" + std::to_string(-rank) + ", " +
                         std::to_string(rank - 1) + "]");
  return axis < 0 ? axis + rank : axis;
}

// Normalized, sorted, without repeats.
std::vector<int64_t> Sema::normAxes(const std::vector<int64_t> &axes, int64_t rank, Loc loc,
                                    const std::string &what) {
  std::vector<int64_t> out;
  for (int64_t a : axes) out.push_back(normAxis(a, rank, loc, what));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    fail(DiagId::BadAxis, loc, what + " lists a dimension twice", "list each axis once");
  return out;
}

// `"x"`, `("x", "y")`, or a name bound to static axis names; nullopt if `e` is none of these.
std::optional<std::vector<std::string>> Sema::staticAxesOpt(const ast::Expr &e) {
  if (e.kind == ast::Expr::StringLit) return std::vector<std::string>{e.name};
  if (e.kind == ast::Expr::Name && e.module.empty()) {
    Scope *s = findScope(e.name);
    if (s && s->names[e.name].kind == SVal::Axes) return s->names[e.name].axes;
    return std::nullopt;
  }
  if (e.kind == ast::Expr::TupleLit) {
    std::vector<std::string> out;
    for (const auto &item : e.items) {
      auto part = staticAxesOpt(*item);
      if (!part) return std::nullopt;
      out.insert(out.end(), part->begin(), part->end());
    }
    return out;
  }
  return std::nullopt;
}

} // namespace shmapc::sema
