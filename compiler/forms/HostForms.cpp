// How each host value is kept (HostForms.h). Under MPI (docs/runtime.md, "Several processes")
// a rank's copy of a value only shmaps read needs only the blocks its own devices read: a
// shmap output stays split across the ranks instead of being exchanged (the residuals a
// forward shmap hands to its backward shmap), and a `load` reads only the rank's blocks from
// the file; a value one pipeline group's stage program alone reads lives on that group's
// ranks alone ("Pipelines").
#include "forms/HostForms.h"

#include <map>
#include <set>

namespace shmapc::forms {

bool ShmapLayout::operator==(const ShmapLayout &o) const {
  auto trimmed = [](std::vector<std::vector<int>> dims) {
    while (!dims.empty() && dims.back().empty()) dims.pop_back();
    return dims;
  };
  return mesh == o.mesh && trimmed(spec.dims) == trimmed(o.spec.dims);
}

namespace {

// How the uses of a value (so far) read it: none, all as one shmap layout, all by one device
// group's stage program of one pipeline, or some whole.
struct Uses {
  enum Kind { None, Split, Owned, Whole } kind = None;
  ShmapLayout layout;                 // Split
  const ir::Eqn *pipeline = nullptr;  // Owned: by this pipeline's group
  int group = -1;

  void add(const Uses &o) {
    if (o.kind == None || kind == Whole) return;
    if (kind == None) {
      *this = o;
      return;
    }
    if (!(o == *this)) kind = Whole;
  }
  bool operator==(const Uses &o) const {
    if (kind != o.kind) return false;
    if (kind == Split) return layout == o.layout;
    if (kind == Owned) return pipeline == o.pipeline && group == o.group;
    return true;
  }
};

// A loop's carry goes round: the body's result is read by the next iteration's parameter, so
// the uses of a value reach back to themselves. The analysis is a fixpoint: rounds that start
// from "not read" and, where a round meets a value it is still working out, take the previous
// round's answer, until a round changes nothing (the answers only grow: none, split, whole).
class UseAnalysis {
public:
  // (the equations that run a body, found from main: a function no longer reached, such as
  // a trace autodiff replaced, reads nothing)
  explicit UseAnalysis(const ir::Module &m) {
    std::vector<const ir::Func *> work{m.main};
    std::set<const ir::Func *> seen{m.main};
    while (!work.empty()) {
      const ir::Func *f = work.back();
      work.pop_back();
      if (!f) continue;
      for (const ir::Eqn &e : f->eqns)
        for (const ir::Func *b : e.bodies) {
          owners_[b].push_back({f, &e});
          if (seen.insert(b).second) work.push_back(b);
        }
    }
  }

  // Runs rounds of `compute` (which asks `of` about values) until nothing changes.
  template <class F> void fixpoint(F compute) {
    for (;;) {
      memo_.clear();
      wholeAfterLoop_.clear();
      compute();
      if (memo_ == previous_) return;
      previous_ = memo_;
    }
  }

  // How the eqns of `f` (and of the bodies it passes `v` to) read `v`.
  Uses of(const ir::Func &f, const ir::Value *v) {
    auto key = std::make_pair(&f, v);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    if (active_.count(key)) {  // round the loop: the previous round's answer
      auto p = previous_.find(key);
      return p == previous_.end() ? Uses{} : p->second;
    }
    active_.insert(key);
    Uses u;
    const Readers &readers = readersIn(f);
    auto r = readers.find(v);
    if (r != readers.end())
      for (const auto &[e, k] : r->second) {
        u.add(e ? operand(f, *e, k) : result(f, k));
        if (u.kind == Uses::Whole) break;
      }
    active_.erase(key);
    memo_[key] = u;
    return u;
  }

private:
  // How result k of `f` is read: a loop's carry by the next iteration and after the loop, a
  // branch's or a callee's by its equation's readers; main's (none) and anything else whole.
  Uses result(const ir::Func &f, size_t k) {
    const Uses whole{Uses::Whole, {}};
    auto it = owners_.find(&f);
    if (it == owners_.end()) return whole;
    Uses u;
    for (const auto &[owner, e] : it->second) {
      switch (e->prim) {
      case ir::Prim::Loop: u.add(carry(*owner, *e, k)); break;
      case ir::Prim::While:  // bodies: (the predicate, the body)
        if (&f != e->bodies[1]) return whole;
        u.add(carry(*owner, *e, k));
        break;
      case ir::Prim::Cond:
      case ir::Prim::Call: u.add(of(*owner, e->outs.at(k))); break;
      default: return whole;
      }
      if (u.kind == Uses::Whole) break;
    }
    return u;
  }

  // A loop's operand k (consts, then carries) as its bodies' param: a `loop` body's params are
  // (i, consts..., carries...), a `while`'s predicate's and body's (consts..., carries...).
  static size_t loopParam(const ir::Eqn &loop, size_t k) { return loop.prim == ir::Prim::Loop ? k + 1 : k; }

  // How carry c of `loop` (an equation of f) is read: by every step (its bodies' param) and,
  // as its last value, after the loop; its first value may be its last. A carry that one
  // pipeline group keeps through the loop stays the group's when host code reads its last
  // value whole: the loop's output is broadcast from the group then (wholeAfterLoop).
  Uses carry(const ir::Func &f, const ir::Eqn &loop, size_t c) {
    const size_t k = (size_t)loop.intParam("num_consts") + c;
    Uses inside;
    for (const ir::Func *body : loop.bodies) inside.add(param(*body, loopParam(loop, k)));
    const Uses after = of(f, loop.outs.at(c));
    if (inside.kind == Uses::Owned && after.kind != Uses::None && !(after == inside)) {
      wholeAfterLoop_.insert(loop.outs[c]);
      return inside;
    }
    inside.add(after);
    return inside;
  }

public:
  // The loop outputs that carry's last round left to be broadcast after their loop.
  const std::set<const ir::Value *> &wholeAfterLoop() const { return wholeAfterLoop_; }

private:

  // How eqn e (of f) reads its operand k.
  Uses operand(const ir::Func &f, const ir::Eqn &e, size_t k) {
    const Uses whole{Uses::Whole, {}};
    switch (e.prim) {
    case ir::Prim::Shmap: return Uses{Uses::Split, {e.intParam("mesh"), e.specsParam("in_specs")[k]}};
    case ir::Prim::Pipeline: {  // every stage program gets every operand: which of them read it
      Uses u;
      for (size_t g = 0; g < e.bodies.size(); ++g) {
        const ir::Func &program = *e.bodies[g];
        if (k >= program.params.size()) return whole;
        if (!readersIn(program).count(program.params[k])) continue;
        if (u.kind != Uses::None) return whole;  // (two groups' programs: every rank keeps it)
        u = Uses{Uses::Owned, {}, &e, (int)g};
      }
      return u;
    }
    case ir::Prim::PipeSend: {  // sends what the rank holds: a shmap's result as the shmap leaves it
      const auto [producer, j] = producerIn(f, e.ins[k]);
      if (producer && producer->prim == ir::Prim::Shmap)
        return Uses{Uses::Split, {producer->intParam("mesh"), producer->specsParam("out_specs")[j]}};
      return whole;
    }
    case ir::Prim::SaveNpz:  // a checkpoint saves a value as it is kept, blocks or whole
      if (e.has("checkpoint")) return Uses{};
      return whole;
    case ir::Prim::Call: return param(*e.bodies[0], k);
    case ir::Prim::Loop:
    case ir::Prim::While: {
      const size_t consts = (size_t)e.intParam("num_consts");
      if (k >= consts) return carry(f, e, k - consts);
      Uses u;
      for (const ir::Func *body : e.bodies) u.add(param(*body, loopParam(e, k)));
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
      for (size_t k = 0; k < f.results.size(); ++k) it->second[f.results[k]].push_back({nullptr, k});
      for (const ir::Eqn &e : f.eqns)
        for (size_t k = 0; k < e.ins.size(); ++k) it->second[e.ins[k]].push_back({&e, k});
    }
    return it->second;
  }

  // The eqn of f that computes v, and which of its results v is (null: a parameter).
  std::pair<const ir::Eqn *, size_t> producerIn(const ir::Func &f, const ir::Value *v) {
    auto [it, fresh] = producers_.try_emplace(&f);
    if (fresh)
      for (const ir::Eqn &e : f.eqns)
        for (size_t j = 0; j < e.outs.size(); ++j) it->second[e.outs[j]] = {&e, j};
    auto p = it->second.find(v);
    return p == it->second.end() ? std::make_pair(nullptr, size_t{0}) : p->second;
  }

  using Key = std::pair<const ir::Func *, const ir::Value *>;
  std::map<Key, Uses> memo_, previous_;  // this round's answers, the last round's
  std::set<Key> active_;                 // being worked out (a carry's cycle)
  std::set<const ir::Value *> wholeAfterLoop_;
  std::unordered_map<const ir::Func *, std::vector<std::pair<const ir::Func *, const ir::Eqn *>>> owners_;
  std::unordered_map<const ir::Func *, Readers> readers_;
  std::unordered_map<const ir::Func *, std::unordered_map<const ir::Value *, std::pair<const ir::Eqn *, size_t>>>
      producers_;
};

// Values that share one buffer: a call's operand and its callee's parameter, a callee's result
// and the call's output (so with a branch's, a loop body's), a loop's initial carry, its
// bodies' parameters, its body's result and the loop's output. They hold their value in one
// form, whole or as blocks. (Without `initialCarries`, a loop's initial carry is not joined to
// its carry: for a group's values, which the loop copies in from a whole one.)
class SharedBuffers {
public:
  explicit SharedBuffers(bool initialCarries = true) : initialCarries_(initialCarries) {}
  void join(const ir::Value *a, const ir::Value *b) { parent_[find(a)] = find(b); }
  const ir::Value *find(const ir::Value *v) {
    auto it = parent_.find(v);
    if (it == parent_.end()) return parent_[v] = v;
    if (it->second == v) return v;
    return it->second = find(it->second);
  }

  void joinEqn(const ir::Eqn &e) {
    auto params = [&](const ir::Func *body, size_t first, size_t in) {  // operands from `in` on
      for (size_t k = in; k < e.ins.size() && first + k - in < body->params.size(); ++k)
        join(e.ins[k], body->params[first + k - in]);
    };
    auto results = [&](const ir::Func *body) {
      for (size_t k = 0; k < e.outs.size() && k < body->results.size(); ++k) join(e.outs[k], body->results[k]);
    };
    switch (e.prim) {
    case ir::Prim::Call:
      params(e.bodies[0], 0, 0);
      results(e.bodies[0]);
      break;
    case ir::Prim::Loop:  // body params (i, consts..., carries...)
    case ir::Prim::While: {  // predicate and body params (consts..., carries...)
      const size_t first = e.prim == ir::Prim::Loop ? 1 : 0, consts = (size_t)e.intParam("num_consts");
      results(e.bodies.back());
      for (const ir::Func *body : e.bodies) {
        if (initialCarries_) {
          params(body, first, 0);
          continue;
        }
        for (size_t k = 0; k < consts && k < e.ins.size() && first + k < body->params.size(); ++k)
          join(e.ins[k], body->params[first + k]);
        for (size_t c = 0; c < e.outs.size() && first + consts + c < body->params.size(); ++c)
          join(body->params[first + consts + c], e.outs[c]);  // (the carry, not its first value)
      }
      for (size_t c = 0; initialCarries_ && c < e.outs.size() && consts + c < e.ins.size(); ++c)
        join(e.outs[c], e.ins[consts + c]);
      break;
    }
    case ir::Prim::Cond:  // operand 0 is the predicate
      for (const ir::Func *branch : e.bodies) {
        params(branch, 0, 1);
        results(branch);
      }
      break;
    default: break;
    }
  }

private:
  std::unordered_map<const ir::Value *, const ir::Value *> parent_;
  bool initialCarries_;
};

// Whether the layout splits the array over more than one device (else its blocks are the
// whole array, and the blocks form would change nothing).
bool splitsOverDevices(const ir::Module &m, const ShmapLayout &layout) {
  return m.meshes[(size_t)layout.mesh]->groupSize(layout.spec.axes()) > 1;
}

} // namespace

HostForms findHostForms(const ir::Module &irm) {
  HostForms out;
  // Each pipeline's messages: channel c's sender and receiver, among its stage programs.
  for (const auto &f : irm.funcs)
    for (const ir::Eqn &e : f->eqns) {
      if (e.prim != ir::Prim::Pipeline) continue;
      std::map<int64_t, const ir::Eqn *> sends, recvs;
      for (const ir::Func *program : e.bodies)
        for (const ir::Eqn &m : program->eqns) {
          if (m.prim == ir::Prim::PipeSend) sends[m.intParam("channel")] = &m;
          if (m.prim == ir::Prim::PipeRecv) recvs[m.intParam("channel")] = &m;
        }
      for (const auto &[c, send] : sends) {
        auto recv = recvs.find(c);
        if (recv == recvs.end()) continue;
        out.messagePeers[send] = recv->second->outs[0];
        out.messagePeers[recv->second] = send->ins[0];
      }
    }
  UseAnalysis uses(irm);
  auto hostValues = [&](auto visit) {  // (params and eqn results of host code)
    for (const auto &f : irm.funcs)
      if (!f->mesh) {
        for (const ir::Value *p : f->params) visit(*f, p);
        for (const ir::Eqn &e : f->eqns)
          for (const ir::Value *v : e.outs) visit(*f, v);
      }
  };
  uses.fixpoint([&] { hostValues([&](const ir::Func &f, const ir::Value *v) { uses.of(f, v); }); });
  for (const auto &f : irm.funcs) {
    if (f->mesh) continue;  // (a shmap body's values are blocks already)
    for (const ir::Eqn &e : f->eqns)
      for (const ir::Value *v : e.outs) {
        Uses u = uses.of(*f, v);
        if (u.kind == Uses::Split) out.splitLayouts[v] = u.layout;
        if (u.kind == Uses::None) out.unread.insert(v);
      }
  }

  // The blocks form, class by class of values sharing a buffer: when every member is read
  // only by shmaps in one layout (or not read), at least one is read, and the layout splits.
  // A group's values, class by class likewise, but for a loop's initial carry, which the loop
  // copies in (all of it on the group's ranks, none elsewhere), so that one initial value may
  // start carries that different groups keep (`carried`). They are written by host code (on
  // every rank, then kept by the group's), by their pipeline's outputs from that group, or
  // through what shares their buffer; not by another group, and not saved by a checkpoint
  // (which saves a value as it is kept).
  SharedBuffers shared, carried(false);
  std::vector<std::pair<const ir::Value *, Uses>> members;
  hostValues([&](const ir::Func &f, const ir::Value *v) {
    members.push_back({v, uses.of(f, v)});
    shared.find(v);
    carried.find(v);
  });
  for (const auto &f : irm.funcs)
    if (!f->mesh)
      for (const ir::Eqn &e : f->eqns) {
        shared.joinEqn(e);
        carried.joinEqn(e);
      }
  std::unordered_map<const ir::Value *, Uses> classUses, groupUses;
  for (const auto &[v, u] : members) {
    classUses[shared.find(v)].add(u);
    // (a loop's output broadcast after it is read whole only then)
    groupUses[carried.find(v)].add(uses.wholeAfterLoop().count(v) ? Uses{} : u);
  }
  const Uses whole{Uses::Whole, {}};
  for (const auto &f : irm.funcs)
    for (const ir::Eqn &e : f->eqns) {
      if (e.prim == ir::Prim::Pipeline) {
        // A pipeline's stage programs get its operands whole (shm_run_pipeline passes the
        // caller's buffers), so their parameters, and what shares a buffer with them, are kept whole.
        for (const ir::Func *program : e.bodies)
          for (const ir::Value *p : program->params) {
            classUses[shared.find(p)].add(whole);
            groupUses[carried.find(p)].add(whole);
          }
        for (size_t g = 0, j = 0; g < e.bodies.size(); ++g)
          for (size_t r = 0; r < e.bodies[g]->results.size() && j < e.outs.size(); ++r, ++j) {
            Uses &c = groupUses[carried.find(e.outs[j])];
            if (c.kind == Uses::Owned && (c.pipeline != &e || c.group != (int)g)) c.kind = Uses::Whole;
          }
      }
      if (e.prim == ir::Prim::SaveNpz && e.has("checkpoint") && !f->mesh)
        for (const ir::Value *v : e.ins) groupUses[carried.find(v)].add(whole);
    }
  // A group's initial carry starts a carry the same group keeps (else the loop would copy a
  // whole value from it).
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto &f : irm.funcs)
      for (const ir::Eqn &e : f->eqns) {
        if (f->mesh || (e.prim != ir::Prim::Loop && e.prim != ir::Prim::While)) continue;
        const size_t consts = (size_t)e.intParam("num_consts");
        for (size_t c = 0; c < e.outs.size() && consts + c < e.ins.size(); ++c) {
          Uses &init = groupUses[carried.find(e.ins[consts + c])];
          if (init.kind == Uses::Owned && !(groupUses[carried.find(e.outs[c])] == init)) {
            init.kind = Uses::Whole;
            changed = true;
          }
        }
      }
  }
  for (const auto &[v, u] : members) {
    const Uses &c = classUses[shared.find(v)];
    if (c.kind == Uses::Split && splitsOverDevices(irm, c.layout)) out.blocksLayouts[v] = c.layout;
    const Uses &g = groupUses[carried.find(v)];
    if (g.kind == Uses::Owned) {
      GroupOwner owner;
      owner.group = g.group;
      for (int64_t d : g.pipeline->intsParam("device_groups")) owner.deviceGroups.push_back((int32_t)d);
      owner.groups = (int32_t)g.pipeline->bodies.size();
      out.groupOwners[v] = std::move(owner);
    }
  }
  for (const ir::Value *v : uses.wholeAfterLoop())
    if (out.groupOwners.count(v)) out.wholeAfterLoop.insert(v);
  // A value a checkpoint saves is either in the blocks form or whole and valid on every rank:
  // not a whole-size buffer of which a rank wrote only its blocks.
  for (const auto &f : irm.funcs)
    if (!f->mesh)
      for (const ir::Eqn &e : f->eqns)
        if (e.prim == ir::Prim::SaveNpz && e.has("checkpoint"))
          for (const ir::Value *v : e.ins)
            if (!out.blocksLayouts.count(v)) {
              out.splitLayouts.erase(v);
              out.unread.erase(v);
            }
  return out;
}

} // namespace shmapc::forms
