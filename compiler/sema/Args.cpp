// Builtin call arguments: binding positional and keyword arguments to parameter names, and
// reading the static ones (integers, axis lists, types, booleans) from the syntax tree.
#include "sema/SemaImpl.h"

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

std::optional<int64_t> Sema::staticIntOpt(const ast::Expr &e) {
  if (e.kind == ast::Expr::IntLit) return e.intValue;
  if (e.kind == ast::Expr::Unary && e.op == "-" && e.items.size() == 1)
    if (auto v = staticIntOpt(*e.items[0])) return -*v;
  return std::nullopt;
}

int64_t Sema::staticInt(const ast::Expr &e, const std::string &what) {
  if (auto v = staticIntOpt(e)) return *v;
  fail(DiagId::BadArgument, e.loc, what + " must be an integer literal",
       "write a constant such as 0 or -1; it must be known at compile time");
}

// `1`, `[1, 2]` or `(1, 2)`.
std::vector<int64_t> Sema::staticIntList(const ast::Expr &e, const std::string &what) {
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
  }
  fail(DiagId::BadArgument, e.loc, what + " must be a dtype", "write f32, f64, i32 or bool");
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
