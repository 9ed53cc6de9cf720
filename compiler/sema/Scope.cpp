// Names: binding, lookup, and the captures that carry outer values into nested bodies.
#include "sema/SemaImpl.h"
#include "source/Suggest.h"

#include <algorithm>
#include <functional>

namespace shmapc::sema {

void Sema::bind(const std::string &name, SVal v) { scope_->names[name] = std::move(v); }

Scope *Sema::findScope(const std::string &name) {
  for (Scope *s = scope_; s; s = s->parent)
    if (s->names.count(name)) return s;
  return nullptr;
}

// `v` is defined in `owner`; returns the value that stands for it in `ctx`. Each nested body
// between them gets a parameter for it (once), which its eqn later feeds from outside.
ir::Value *Sema::importValue(FuncCtx *ctx, ir::Value *v, FuncCtx *owner) {
  if (ctx == owner || !ctx->parent) return v;
  ir::Value *outer = importValue(ctx->parent, v, owner);
  auto it = ctx->captures.find(outer);
  if (it != ctx->captures.end()) return it->second;
  ir::Value *p = ctx->func->newValue(outer->type, outer->hint);
  ctx->captures[outer] = p;
  ctx->captureOrder.push_back(outer);
  return p;
}

std::vector<std::string> Sema::visibleNames() {
  std::vector<std::string> names;
  for (Scope *s = scope_; s; s = s->parent)
    for (const auto &[n, v] : s->names) names.push_back(n);
  return names;
}

SVal Sema::lookup(const std::string &name, Loc loc) {
  Scope *s = findScope(name);
  if (!s) {
    if (std::optional<SVal> arg = programArg(name, loc)) return *arg;
    if (cur_->unit->funcs.count(name))
      fail(DiagId::FunctionNotCalled, loc, name + " is a function, not a value",
           "call it: " + name + "(...); functions are passed only to transformations such as "
           "grad(" + name + ")");
    std::string near = closestName(name, visibleNames());
    fail(DiagId::UnknownName, loc, "unknown name " + name,
         near.empty() ? "bind it first with `let " + name + " = ...;`"
                      : "did you mean " + near + "?");
  }
  return imported(s->names[name], s, loc);
}

SVal Sema::imported(SVal v, Scope *s, Loc loc) {
  std::function<void(SVal &)> import = [&](SVal &x) {
    x.loc = loc;
    if (x.kind == SVal::Array) x.value = importValue(cur_, x.value, s->owner);
    for (SVal &item : x.items) import(item);  // a tuple: each leaf
  };
  import(v);
  return v;
}

// "Did you mean" hints (source/Suggest.h: bounded, so long names stay cheap).
std::string Sema::closestName(const std::string &name, const std::vector<std::string> &cands) {
  return shmapc::closestName(name, cands);
}

} // namespace shmapc::sema
