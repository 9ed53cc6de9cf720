// Names: binding, lookup, and the captures that carry outer values into nested bodies.
#include "sema/SemaImpl.h"

#include <algorithm>

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
    if (cur_->unit->funcs.count(name))
      fail(DiagId::FunctionNotCalled, loc, name + " is a function, not a value",
           "call it: " + name + "(...); functions are passed only to transformations such as "
           "grad(" + name + ")");
    std::string near = closestName(name, visibleNames());
    fail(DiagId::UnknownName, loc, "unknown name " + name,
         near.empty() ? "bind it first with `let " + name + " = ...;`"
                      : "did you mean " + near + "?");
  }
  SVal v = s->names[name];
  v.loc = loc;
  if (v.kind == SVal::Array) v.value = importValue(cur_, v.value, s->owner);
  return v;
}

// The candidate within edit distance 2 (and less than the name's length) closest to `name`,
// or "" if none is close: used for "did you mean" hints.
std::string Sema::closestName(const std::string &name, const std::vector<std::string> &cands) {
  auto distance = [](const std::string &a, const std::string &b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
        diag = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t bestD = 3;
  for (const std::string &c : cands) {
    size_t d = distance(name, c);
    if (d < bestD && d < name.size()) {
      bestD = d;
      best = c;
    }
  }
  return best;
}

} // namespace shmapc::sema
