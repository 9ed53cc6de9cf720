// Host values that only shmaps read, and in which layout (ModuleEmitter::splitLayout). Under
// MPI (docs/runtime.md, "Several processes") a rank's copy of such a value needs only the
// blocks its own devices read: a shmap output stays split across the ranks instead of being
// exchanged (the residuals a forward shmap hands to its backward shmap), and a `load` reads
// only the rank's blocks from the file. One process holds every block either way.
#include "codegen/CodegenContext.h"

#include <unordered_map>

namespace shmapc::codegen {

bool ShmapLayout::operator==(const ShmapLayout &o) const {
  auto trimmed = [](std::vector<std::vector<int>> dims) {
    while (!dims.empty() && dims.back().empty()) dims.pop_back();
    return dims;
  };
  return mesh == o.mesh && trimmed(spec.dims) == trimmed(o.spec.dims);
}

namespace {

// How the uses of a value (so far) read it: none, all as one shmap layout, or some whole.
struct Uses {
  enum Kind { None, Split, Whole } kind = None;
  ShmapLayout layout;

  void add(const Uses &o) {
    if (o.kind == None || kind == Whole) return;
    if (kind == None) {
      *this = o;
      return;
    }
    if (o.kind == Whole || !(o.layout == layout)) kind = Whole;
  }
};

class UseAnalysis {
public:
  // How the eqns of `f` (and of the bodies it passes `v` to) read `v`.
  Uses of(const ir::Func &f, const ir::Value *v) {
    auto key = std::make_pair(&f, v);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    memo_[key] = Uses{Uses::Whole, {}};  // (a cycle, which no program has: read whole)
    Uses u;
    const Readers &readers = readersIn(f);
    auto r = readers.find(v);
    if (r != readers.end())
      for (const auto &[e, k] : r->second) {
        if (!e) u.kind = Uses::Whole;  // (a result of f)
        if (u.kind == Uses::Whole) break;
        u.add(operand(*e, k));
      }
    memo_[key] = u;
    return u;
  }

private:
  // How eqn e reads its operand k.
  Uses operand(const ir::Eqn &e, size_t k) {
    const Uses whole{Uses::Whole, {}};
    switch (e.prim) {
    case ir::Prim::Shmap: return Uses{Uses::Split, {e.intParam("mesh"), e.specsParam("in_specs")[k]}};
    case ir::Prim::Call: return param(*e.bodies[0], k);
    case ir::Prim::Loop:  // (i, consts..., carries...): a carry is rewritten, so read whole
      return (int64_t)k < e.intParam("num_consts") ? param(*e.bodies[0], k + 1) : whole;
    case ir::Prim::While: {
      if ((int64_t)k >= e.intParam("num_consts")) return whole;
      Uses u = param(*e.bodies[0], k);
      u.add(param(*e.bodies[1], k));
      return u;
    }
    case ir::Prim::Cond: {
      if (k == 0) return whole;
      Uses u = param(*e.bodies[0], k - 1);
      u.add(param(*e.bodies[1], k - 1));
      return u;
    }
    default: return whole;
    }
  }
  Uses param(const ir::Func &body, size_t i) {
    if (i >= body.params.size()) return Uses{Uses::Whole, {}};
    return of(body, body.params[i]);
  }

  // Each value f's equations read, with the equations and operand indices that read it (a
  // result of f: a null equation), in order: built once per function, so finding every
  // value's uses is linear in the function's size.
  using Readers = std::unordered_map<const ir::Value *, std::vector<std::pair<const ir::Eqn *, size_t>>>;
  const Readers &readersIn(const ir::Func &f) {
    auto [it, fresh] = readers_.try_emplace(&f);
    if (fresh) {
      for (const ir::Value *r : f.results) it->second[r].push_back({nullptr, 0});
      for (const ir::Eqn &e : f.eqns)
        for (size_t k = 0; k < e.ins.size(); ++k) it->second[e.ins[k]].push_back({&e, k});
    }
    return it->second;
  }

  std::map<std::pair<const ir::Func *, const ir::Value *>, Uses> memo_;
  std::unordered_map<const ir::Func *, Readers> readers_;
};

} // namespace

void ModuleEmitter::findSplitLayouts() {
  UseAnalysis uses;
  for (const auto &f : irm.funcs) {
    if (f->mesh) continue;  // (a shmap body's values are blocks already)
    for (const ir::Eqn &e : f->eqns)
      for (const ir::Value *v : e.outs) {
        Uses u = uses.of(*f, v);
        if (u.kind == Uses::Split) splitLayouts_[v] = u.layout;
        if (u.kind == Uses::None) unread_.insert(v);
      }
  }
}

const ShmapLayout *ModuleEmitter::splitLayout(const ir::Value *v, bool *unread) const {
  auto it = splitLayouts_.find(v);
  if (unread) *unread = unread_.count(v) != 0;
  return it == splitLayouts_.end() ? nullptr : &it->second;
}

} // namespace shmapc::codegen
