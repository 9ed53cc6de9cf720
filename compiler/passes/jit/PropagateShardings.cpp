// propagateShardings (Shardy's propagation): gives every value of each @jit function a sharding,
// from the ones written on its parameters and results, through each equation's factor rule
// (rules/Rules.h, FactorRule: the dimensions of operands and results that are one factor take one
// sharding), as Shardy propagates:
//
// - Priorities first: the written dimension shardings of priority 0 (those without one are 0)
//   propagate through the whole function to a fixed point before those of priority 1 join, and
//   so on, so a lower priority never overrides a higher one's choice.
// - At each equation, forward and backward: a factor whose dimensions include one with a
//   sharding gives it to those without one (an open dimension with nothing yet), unless an
//   axis it uses is already used by another dimension of that value or another factor of the
//   equation with result dimensions (a reduced factor's axes do not count: the partitioner
//   then gathers its operand or sums the result, whichever moves fewer bytes).
// - Conflicts (a factor's dimensions with different shardings) stay: the partitioner moves
//   the operand. Which sharding the factor keeps is the stated rule: a closed (written)
//   dimension's over a propagated one's, then the larger array's (moving the smaller moves
//   fewer bytes), then the first operand's.
// - An axis a value's sharding names as explicitly replicated never shards it.
// - A mesh axis shards at most one dimension of a value: an axis another dimension uses, or
//   was written with at a priority not yet propagated (Shardy holds those axes explicitly
//   replicated until then), is never given to an open dimension, nor seeded on a value written
//   twice (a parameter returned) where the other sharding put it on another dimension. Where
//   the factor's sharding then differs, the partitioner moves the operand (as at any conflict).
// - An open dimension written with axes ({"x", ?}) may take further axes after them
//   ({"x", "y"}) from a factor that has those.
// - A dimension nothing reaches is unsharded; a replicated primitive (computed whole on each
//   device) passes nothing through.
#include "passes/jit/Jit.h"
#include "passes/inline/Inline.h"
#include "rules/Rules.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace shmapc::passes {

namespace {

using namespace ir;

// A dimension's state during propagation.
struct DimState {
  bool known = false;     // has a sharding (written or propagated)
  bool closed = false;    // written closed: never changes
  bool reserved = false;  // written, of a priority not yet propagated: nothing else assigns it
  // (a reserved dimension's written axes: no other dimension of its value takes them before
  // they are seeded, as Shardy holds them explicitly replicated until their priority)
  std::vector<AxisRef> reservedAxes;
  bool extensible = false;  // open with axes (written {"x", ?}, or propagated): may take more after them
  std::vector<AxisRef> axes;
};

class Propagation {
public:
  explicit Propagation(JitFunc &j) : j_(j), f_(*j.func) {}

  void run() {
    for (Value *p : f_.params) state(p);
    collect(f_);
    // The written shardings: parameters', results', and sharding_constraint's.
    for (size_t i = 0; i < j_.inShardings.size(); ++i) written_.push_back({f_.params[i], j_.inShardings[i]});
    for (size_t i = 0; i < j_.outShardings.size(); ++i) written_.push_back({f_.results[i], j_.outShardings[i]});
    for (const Eqn *e : all_)
      if (e->prim == Prim::ShardingConstraint) written_.push_back({e->outs[0], decodeSharding(e->intsParam("sharding"))});
    std::set<int64_t> levels = {0};
    for (const auto &[v, sh] : written_)
      for (const DimSharding &d : sh.dims) levels.insert(std::max<int64_t>(0, d.priority));
    for (int64_t level : levels) {
      seed(level);
      for (int round = 0; round < 64 && sweep(); ++round) {
      }
    }
    // A value with a written sharding keeps what was written of it (open dimensions, their
    // priorities, explicit replication) with the axes propagation found.
    std::map<const Value *, const Sharding *> written;
    for (const auto &[v, sh] : written_) written[v] = &sh;
    for (auto &[v, dims] : states_) {
      Sharding s;
      s.mesh = j_.mesh;
      auto w = written.find(v);
      if (w != written.end()) s = *w->second;
      s.dims.resize(dims.size());
      for (size_t d = 0; d < dims.size(); ++d) s.dims[d].axes = dims[d].axes;
      j_.propagated[v] = s;
    }
  }

private:
  // Every equation, those in the bodies of loops and conditionals after the one that has
  // them, and the values they define.
  void collect(const Func &f) {
    for (const Eqn &e : f.eqns) {
      all_.push_back(&e);
      for (const Value *v : e.outs) state(v);
      if (rules::rulesOf(e.prim).sharding(e).kind != rules::FactorRule::Nested) continue;
      for (const Func *body : e.bodies) {
        for (const Value *p : body->params) state(p);
        collect(*body);
      }
    }
  }

  std::vector<DimState> &state(const Value *v) {
    auto it = states_.find(v);
    if (it != states_.end()) return it->second;
    return states_[v] = std::vector<DimState>((size_t)v->type.rank());
  }

  // The written shardings of priority <= level (a dimension without a priority is 0).
  void seed(int64_t level) {
    auto apply = [&](const Value *v, const Sharding &s) {
      std::vector<DimState> &st = state(v);
      replicated_[v] = s.replicated;
      for (size_t d = 0; d < s.dims.size() && d < st.size(); ++d) {
        const DimSharding &dim = s.dims[d];
        if (st[d].known || (dim.axes.empty() && dim.open)) continue;  // (`{?}`: nothing to give)
        st[d].reserved = std::max<int64_t>(0, dim.priority) > level;
        st[d].reservedAxes = st[d].reserved ? dim.axes : std::vector<AxisRef>{};
        if (st[d].reserved) continue;
        // (a dimension whose axes another dimension of its value holds already, from an
        // earlier priority, keeps none, so no axis shards two of its dimensions; a value is
        // written once: separateReturnedValues)
        bool taken = false;
        for (size_t e = 0; e < st.size(); ++e)
          for (const AxisRef &a : dim.axes)
            for (const AxisRef &b : st[e].axes) taken |= e != d && a.overlaps(b);
        if (taken) continue;
        st[d].known = true;
        st[d].closed = !dim.open;
        st[d].extensible = dim.open && !dim.axes.empty();
        st[d].axes = dim.axes;
      }
    };
    for (const auto &[v, sh] : written_) apply(v, sh);
  }

  // One pass over the equations, forward then backward; whether anything changed.
  bool sweep() {
    bool changed = false;
    for (const Eqn *e : all_) changed |= propagate(*e);
    for (auto it = all_.rbegin(); it != all_.rend(); ++it) changed |= propagate(**it);
    return changed;
  }

  // A dimension of a factor: a value's dimension, or (a reshape's) the part of it of `size`
  // after the factors of product `pre` (rules/Rules.h).
  struct Entry {
    const Value *v;
    int dim;
    int64_t pre = 1, size = 0;
    bool whole() const { return pre == 1 && (size == 0 || size == v->type.shape[(size_t)dim]); }
    int64_t extent() const { return size ? size : v->type.shape[(size_t)dim]; }
  };

  // An entry's sharding: its dimension's, or the part of it the entry is.
  struct View {
    bool known = false, closed = false, extensible = false;
    std::vector<AxisRef> axes;
  };

  View view(const Entry &en) {
    const DimState &st = state(en.v)[(size_t)en.dim];
    if (en.whole()) return {st.known, st.closed, st.extensible, st.axes};
    // (a part is known once its dimension's axes reach into it, or the dimension is closed)
    return {st.known && (st.closed || shardCount(st.axes) > en.pre), st.closed, st.extensible,
            projectAxes(st.axes, en.pre, en.extent())};
  }

  // The axes of en's dimension before its part.
  std::vector<AxisRef> head(const Entry &en) {
    return en.whole() ? std::vector<AxisRef>{} : projectAxes(state(en.v)[(size_t)en.dim].axes, 1, en.pre);
  }

  // The sharding a factor's known dimensions give it (the stated rule above), if any.
  std::optional<View> chosen(const std::vector<Entry> &entries) {
    std::optional<View> best;
    int64_t bestBytes = -1;
    for (const Entry &en : entries) {
      View d = view(en);
      if (!d.known) continue;
      const int64_t bytes = en.v->type.byteSize();
      if (!best || (d.closed && !best->closed) || (d.closed == best->closed && bytes > bestBytes)) {
        best = std::move(d);
        bestBytes = bytes;
      }
    }
    return best;
  }

  bool propagate(const Eqn &e) {
    const rules::FactorRule rule = rules::rulesOf(e.prim).sharding(e);
    if (rule.kind == rules::FactorRule::Nested) {
      // Each tied group on its own: its dimensions are its factors.
      bool changed = false;
      for (const std::vector<rules::Tied> &group : rule.ties) {
        std::vector<const Value *> values;
        for (const rules::Tied &t : group) values.push_back(rules::tiedValue(e, t));
        std::vector<std::vector<Entry>> entries(values[0]->type.shape.size());
        for (size_t d = 0; d < entries.size(); ++d)
          for (const Value *v : values) entries[d].push_back({v, (int)d});
        changed |= propagateFactors(entries, std::vector<bool>(entries.size(), false));
      }
      return changed;
    }
    if (rule.kind != rules::FactorRule::Factors) return false;
    std::vector<std::vector<Entry>> entries;
    std::vector<bool> reduced;
    for (const rules::Factor &f : rule.factors) {
      reduced.push_back(f.outs.empty());
      std::vector<Entry> es;
      for (const rules::DimRef &r : f.ins) es.push_back({e.ins[(size_t)r.value], r.dim, r.pre, f.size});
      for (const rules::DimRef &r : f.outs) es.push_back({e.outs[(size_t)r.value], r.dim, r.pre, f.size});
      entries.push_back(es);
    }
    return propagateFactors(entries, reduced);
  }

  // The factors' dimensions give their shardings to those without one.
  bool propagateFactors(const std::vector<std::vector<Entry>> &entries, const std::vector<bool> &reduced) {
    reduced_ = &reduced;
    bool changed = false;
    for (size_t k = 0; k < entries.size(); ++k) {
      const std::optional<View> from = chosen(entries[k]);
      if (!from || from->axes.empty()) continue;
      std::vector<AxisRef> axes = from->axes;
      changed |= give(axes, entries, k, false);
      // An open dimension with axes ({"x", ?}, or one propagation gave) takes the longest
      // sharding of the factor that starts with them ({"x", "y"}).
      for (const Entry &en : entries[k]) {
        const View d = view(en);
        if (d.known && d.axes.size() > axes.size() && std::equal(axes.begin(), axes.end(), d.axes.begin()))
          axes = d.axes;
      }
      changed |= give(axes, entries, k, true);
    }
    return changed;
  }

  // Gives `axes` to the dimensions of factor k without a sharding, or (extend) to those whose
  // open sharding they extend. A part of a dimension takes them after the axes of the parts
  // before it, once those are sharded wholly (and its dimension is not closed).
  bool give(const std::vector<AxisRef> &axes, const std::vector<std::vector<Entry>> &entries, size_t k, bool extend) {
    bool changed = false;
    for (const Entry &en : entries[k]) {
      const View to = view(en);
      const DimState &st = state(en.v)[(size_t)en.dim];
      const bool extends = extend && to.known && to.extensible && to.axes.size() < axes.size() &&
                           std::equal(to.axes.begin(), to.axes.end(), axes.begin());
      if ((to.known && !extends) || st.reserved || !fits(axes, en, entries, k)) continue;
      std::vector<AxisRef> now = axes;
      if (!en.whole()) {
        const bool after = st.known ? st.extensible && !st.closed && shardCount(st.axes) >= en.pre : en.pre == 1;
        if (!after) continue;
        now = head(en);
        if (shardCount(now) != en.pre) continue;
        now.insert(now.end(), axes.begin(), axes.end());
        now = mergeSubAxes(now);
      }
      DimState &d = state(en.v)[(size_t)en.dim];
      d.known = true;
      d.extensible = true;  // (a propagated sharding is open)
      d.axes = now;
      changed = true;
    }
    return changed;
  }

  // Whether `axes` may shard dimension en: no other dimension of the value, no part of its
  // dimension before it, and no other factor of the equation, uses any of them.
  bool fits(const std::vector<AxisRef> &axes, const Entry &en, const std::vector<std::vector<Entry>> &entries,
            size_t factor) {
    auto clash = [&](const std::vector<AxisRef> &used) {
      for (const AxisRef &a : axes)
        for (const AxisRef &b : used)
          if (a.overlaps(b)) return true;
      return false;
    };
    // A whole dimension may be split unevenly (partitioning pads it), but one of size 1 is
    // never split; a reshape's part only evenly (its padding would be inside the dimension).
    if (en.whole() ? en.extent() == 1 : en.extent() % shardCount(axes) != 0) return false;
    auto forbidden = replicated_.find(en.v);  // explicitly replicated: never sharded along
    if (forbidden != replicated_.end() && clash(forbidden->second)) return false;
    const std::vector<DimState> &st = state(en.v);
    // (a mesh axis shards at most one dimension of a value: one a dimension of a later
    // priority was written with is taken too, or seeding it would name the axis twice)
    for (size_t d = 0; d < st.size(); ++d)
      if ((int)d != en.dim && (clash(st[d].axes) || clash(st[d].reservedAxes))) return false;
    if (clash(head(en))) return false;
    for (size_t k = 0; k < entries.size(); ++k) {
      // (a reduced factor's axes do not keep a factor of the result from them: the
      // partitioner then gathers the operand or sums the result, whichever moves less)
      if (k == factor || (*reduced_)[k]) continue;
      for (const Entry &other : entries[k])
        if (clash(view(other).axes)) return false;
    }
    return true;
  }

  JitFunc &j_;
  Func &f_;
  std::vector<const Eqn *> all_;
  const std::vector<bool> *reduced_ = nullptr;  // (of the factors propagateFactors is at)
  std::vector<std::pair<const Value *, Sharding>> written_;
  std::map<const Value *, std::vector<DimState>> states_;
  std::map<const Value *, std::vector<AxisRef>> replicated_;
};

} // namespace

namespace {

// What keeps partitioning from placing j (PartitionJit.cpp), or "".
std::string whyNotPartitioned(const Func &f) {
  for (const Eqn &e : f.eqns) {
    const rules::FactorRule::Kind kind = rules::rulesOf(e.prim).sharding(e).kind;
    if (kind == rules::FactorRule::Unsupported) return std::string(primName(e.prim)) + " in a jit function";
    if (kind == rules::FactorRule::Nested)
      for (const Func *body : e.bodies)
        if (std::string why = whyNotPartitioned(*body); !why.empty()) return why;
  }
  return "";
}

} // namespace

namespace {

// A result with a written sharding that is also a parameter, an earlier result or a
// sharding_constraint's value (written once more) gets a value of its own (a sharding_constraint to its written sharding): one value holds one sharding, and
// the parameter's written sharding and the result's each stay what was written (the
// partitioner moves the value from one to the other), rather than one of them dropped.
void separateReturnedValues(JitFunc &j) {
  Func &f = *j.func;
  for (size_t i = 0; i < f.results.size() && i < j.outShardings.size(); ++i) {
    Value *r = f.results[i];
    const bool param = std::find(f.params.begin(), f.params.end(), r) != f.params.end();
    const bool constrained = std::any_of(f.eqns.begin(), f.eqns.end(), [&](const Eqn &e) {
      return e.prim == Prim::ShardingConstraint && e.outs[0] == r;
    });
    if (!param && !constrained &&
        std::find(f.results.begin(), f.results.begin() + (ptrdiff_t)i, r) == f.results.begin() + (ptrdiff_t)i)
      continue;
    Eqn e;
    e.prim = Prim::ShardingConstraint;
    e.loc = f.returnLoc.valid() ? f.returnLoc : j.loc;
    e.ins = {r};
    e.params["sharding"] = encodeSharding(j.outShardings[i]);
    Value *own = f.newValue(r->type, r->hint);
    e.outs = {own};
    f.eqns.push_back(std::move(e));
    f.results[i] = own;
  }
}

} // namespace

void propagateShardings(Module &m, Diagnostics &) {
  for (JitFunc &j : m.jits) {
    if (!j.func) continue;
    inlineCallsIn(m, *j.func);  // (the functions it calls are computed in its shardings too)
    separateReturnedValues(j);
    j.propagated.clear();
    Propagation(j).run();
    j.notPartitioned = whyNotPartitioned(*j.func);
  }
}

} // namespace shmapc::passes
