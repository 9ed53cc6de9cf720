// partitionJit (issue 13): each @jit function, its shardings propagated, becomes a shmap: the
// function's body is replaced by one shmap equation whose in_specs / out_specs are its
// parameters' and results' shardings, and whose body computes each equation on the local
// blocks, in the sharding its factor rule asks of the operands (prims/Rules.h):
//
// - An operand held in another sharding is moved: axes that move from one dimension to
//   another by all_to_all; other dimensions whose axes differ are gathered
//   (all_gather_invariant over the axes they were sharded along), then sharded again by
//   slicing (pscatter: each device keeps its block, no communication).
// - A reduced factor sharded along some axes (matmul's contracting dimension, a reduction's
//   axes) leaves each device a partial result: psum (pmax, pmin) over those axes finishes it,
//   or psum_scatter where a result dimension is to be sharded along the same axes (each device
//   computes that dimension whole from its shards; the sum comes split).
// - A primitive computed whole takes its operands unsharded and gives its result unsharded; a
//   splat constant is made at its local shape.
//
// The shmap then goes through the pipeline as one the user wrote: variance inference (which
// types every value and inserts pbroadcasts), autodiff with seed 000's transposes, and the
// communication report.
#include "passes/Passes.h"
#include "prims/Rules.h"

#include <algorithm>
#include <map>

namespace shmapc::passes {

namespace {

using namespace ir;

// The mesh axes of one dimension's sharding (full axes: partitioning takes no sub-axes yet).
using Axes = std::vector<int>;

std::vector<Axes> axesOf(const Sharding &s, size_t rank) {
  std::vector<Axes> out(rank);
  for (size_t d = 0; d < s.dims.size() && d < rank; ++d)
    for (const AxisRef &a : s.dims[d].axes) out[d].push_back(a.axis);
  return out;
}

PartitionSpec specOf(const std::vector<Axes> &dims) {
  PartitionSpec p;
  p.dims = dims;
  while (!p.dims.empty() && p.dims.back().empty()) p.dims.pop_back();
  return p;
}

class Partitioner {
public:
  Partitioner(Module &m, JitFunc &j) : m_(m), j_(j), f_(*j.func), mesh_(*m.meshes[(size_t)j.mesh]) {}

  void run() {
    body_ = m_.newFunc(f_.name + "_partitioned");
    body_->loc = f_.loc;
    body_->mesh = &mesh_;
    body_->isShmapBody = true;
    std::vector<PartitionSpec> inSpecs, outSpecs;
    for (Value *p : f_.params) {
      std::vector<Axes> s = target(p);
      Value *local = body_->newValue(localType(p->type, s), p->hint);
      body_->params.push_back(local);
      held_[p] = {local, s};
      inSpecs.push_back(specOf(s));
    }
    for (const Eqn &e : f_.eqns) partition(e);
    for (Value *r : f_.results) {
      std::vector<Axes> s = target(r);
      body_->results.push_back(moved(r, s));
      outSpecs.push_back(specOf(s));
    }
    body_->returnLoc = f_.returnLoc.valid() ? f_.returnLoc : f_.loc;
    for (size_t i = 0; i < f_.results.size(); ++i) body_->outSpecLocs.push_back(j_.loc);

    Eqn call;
    call.prim = Prim::Shmap;
    call.loc = f_.loc;
    call.ins = f_.params;
    call.bodies = {body_};
    call.params["mesh"] = (int64_t)j_.mesh;
    call.params["in_specs"] = inSpecs;
    call.params["out_specs"] = outSpecs;
    std::vector<Value *> results;
    for (Value *r : f_.results) {
      Type t = r->type;
      t.vary = 0;
      results.push_back(f_.newValue(t, r->hint));
    }
    call.outs = results;
    f_.eqns.clear();
    f_.eqns.push_back(std::move(call));
    f_.results = results;
  }

private:
  struct Held {
    Value *local;
    std::vector<Axes> axes;
  };

  // The sharding propagation chose for v (unsharded if none).
  std::vector<Axes> target(const Value *v) {
    auto it = j_.propagated.find(v);
    return it == j_.propagated.end() ? std::vector<Axes>((size_t)v->type.rank())
                                     : axesOf(it->second, (size_t)v->type.rank());
  }

  int64_t count(const Axes &axes) const {
    int64_t n = 1;
    for (int a : axes) n *= mesh_.sizes[(size_t)a];
    return n;
  }

  Type localType(const Type &global, const std::vector<Axes> &s) const {
    Type t = global;
    t.vary = 0;
    for (size_t d = 0; d < s.size(); ++d) t.shape[d] /= count(s[d]);
    return t;
  }

  Value *emit(Prim p, std::vector<Value *> ins, const Type &out, std::map<std::string, Attr> params, Loc loc) {
    Eqn e;
    e.prim = p;
    e.ins = std::move(ins);
    e.params = std::move(params);
    e.loc = loc;
    Value *v = body_->newValue(out);
    e.outs = {v};
    body_->eqns.push_back(std::move(e));
    return v;
  }

  // v's local value in sharding `to`: the dimensions sharded otherwise gathered, then sliced.
  Value *moved(const Value *v, const std::vector<Axes> &to) {
    Held h = held_.at(v);
    if (h.axes == to) return h.local;
    Value *x = h.local;
    std::vector<Axes> now = h.axes;
    // Axes that move from one dimension to another (from an unsharded one to one that is to
    // be unsharded): all_to_all, which sends each device only the parts others keep.
    for (size_t from = 0; from < now.size(); ++from)
      for (size_t d = 0; d < now.size(); ++d) {
        if (d == from || now[from].empty() || now[from] != to[d] || !now[d].empty() || !to[from].empty()) continue;
        Type t = x->type;
        t.vary = 0;
        t.shape[from] *= count(now[from]);
        t.shape[d] /= count(now[from]);
        x = emit(Prim::AllToAll, {x}, t,
                 {{"axes", std::vector<int64_t>(now[from].begin(), now[from].end())}, {"split_axis", (int64_t)d},
                  {"concat_axis", (int64_t)from}, {"tiled", (int64_t)1}},
                 f_.loc);
        now[d] = now[from];
        now[from].clear();
      }
    for (size_t d = 0; d < now.size(); ++d) {
      if (now[d] == to[d] || now[d].empty()) continue;
      Type t = x->type;
      t.vary = 0;
      t.shape[d] *= count(now[d]);
      x = emit(Prim::AllGatherInvariant, {x}, t,
               {{"axes", std::vector<int64_t>(now[d].begin(), now[d].end())}, {"axis", (int64_t)d}, {"tiled", (int64_t)1}},
               f_.loc);
      now[d].clear();
    }
    for (size_t d = 0; d < now.size(); ++d) {
      if (now[d] == to[d]) continue;
      Type t = x->type;
      t.vary = 0;
      t.shape[d] /= count(to[d]);
      x = emit(Prim::Pscatter, {x}, t,
               {{"axes", std::vector<int64_t>(to[d].begin(), to[d].end())}, {"axis", (int64_t)d}, {"tiled", (int64_t)1}},
               f_.loc);
      now[d] = to[d];
    }
    return x;
  }

  void partition(const Eqn &e) {
    const prims::FactorRule rule = prims::rulesOf(e.prim).sharding(e);
    Eqn local = e;
    local.outs.clear();
    if (rule.kind == prims::FactorRule::Free) {
      const std::vector<Axes> s = target(e.outs[0]);
      Value *v = body_->newValue(localType(e.outs[0]->type, s), e.outs[0]->hint);
      local.outs = {v};
      body_->eqns.push_back(std::move(local));
      held_[e.outs[0]] = {v, s};
      return;
    }
    if (rule.kind == prims::FactorRule::Replicated) {
      for (size_t i = 0; i < e.ins.size(); ++i)
        local.ins[i] = moved(e.ins[i], std::vector<Axes>((size_t)e.ins[i]->type.rank()));
      for (const Value *o : e.outs) {
        Type t = o->type;
        t.vary = 0;
        Value *v = body_->newValue(t, o->hint);
        local.outs.push_back(v);
        held_[o] = {v, std::vector<Axes>((size_t)o->type.rank())};
      }
      body_->eqns.push_back(std::move(local));
      return;
    }
    // Factors: each takes its result dimension's axes, or (reduced) its first operand's
    // where no other factor uses them; the operands are moved to those.
    std::vector<std::vector<Axes>> want(e.ins.size());
    for (size_t i = 0; i < e.ins.size(); ++i) want[i].resize((size_t)e.ins[i]->type.rank());
    std::vector<std::vector<Axes>> outs;
    for (const Value *o : e.outs) outs.push_back(target(o));
    // A sum over a factor sharded along the same axes as a result dimension (the reduce-
    // scatter matmul, Tmp[B_X, F_Y] *F W[F_Y, D] -> Out[B_X, D_Y]): each device computes that
    // dimension whole from its shards, and psum_scatter sums and splits it at once.
    int scatterDim = -1;
    Axes scatterAxes;
    for (const prims::Factor &f : rule.factors) {
      if (!f.outs.empty() || f.ins.empty() || f.combine != Prim::Psum || e.outs.size() != 1) continue;
      const Axes &k = held_.at(e.ins[(size_t)f.ins[0].first]).axes[(size_t)f.ins[0].second];
      for (size_t d = 0; d < outs[0].size() && !k.empty() && scatterDim < 0; ++d)
        if (outs[0][d] == k) scatterDim = (int)d, scatterAxes = k;
    }
    std::vector<std::vector<Axes>> computed = outs;  // the local computation's result shardings
    if (scatterDim >= 0) computed[0][(size_t)scatterDim].clear();
    std::vector<bool> usedAxis(mesh_.axes.size(), false);
    for (const prims::Factor &f : rule.factors)
      for (auto [o, d] : f.outs)
        for (int a : computed[(size_t)o][(size_t)d]) usedAxis[(size_t)a] = true;
    std::vector<std::pair<Prim, Axes>> finish;
    for (const prims::Factor &f : rule.factors) {
      Axes axes;
      if (!f.outs.empty()) {
        axes = computed[(size_t)f.outs[0].first][(size_t)f.outs[0].second];
      } else if (!f.ins.empty()) {
        const Axes &first = held_.at(e.ins[(size_t)f.ins[0].first]).axes[(size_t)f.ins[0].second];
        bool free = true;
        for (int a : first) free = free && !usedAxis[(size_t)a];
        if (free) axes = first;
        for (int a : axes) usedAxis[(size_t)a] = true;
        if (!axes.empty()) finish.push_back({axes == scatterAxes ? Prim::PsumScatter : f.combine, axes});
      }
      for (auto [i, d] : f.ins) want[(size_t)i][(size_t)d] = axes;
    }
    for (size_t i = 0; i < e.ins.size(); ++i) local.ins[i] = moved(e.ins[i], want[i]);
    for (size_t k = 0; k < e.outs.size(); ++k) {
      Value *v = body_->newValue(localType(e.outs[k]->type, computed[k]), e.outs[k]->hint);
      local.outs.push_back(v);
    }
    Value *result = local.outs[0];
    body_->eqns.push_back(std::move(local));
    for (const auto &[combine, axes] : finish) {
      const std::vector<int64_t> list(axes.begin(), axes.end());
      if (combine != Prim::PsumScatter) {
        result = emit(combine, {result}, result->type, {{"axes", list}}, e.loc);
        continue;
      }
      Type t = result->type;
      t.shape[(size_t)scatterDim] /= count(axes);
      result = emit(Prim::PsumScatter, {result}, t,
                    {{"axes", list}, {"scatter_dimension", (int64_t)scatterDim}, {"tiled", (int64_t)1}}, e.loc);
    }
    held_[e.outs[0]] = {result, outs[0]};
  }

  Module &m_;
  JitFunc &j_;
  Func &f_;
  const Mesh &mesh_;
  Func *body_ = nullptr;
  std::map<const Value *, Held> held_;
};

} // namespace

void partitionJit(Module &m, Diagnostics &) {
  for (JitFunc &j : m.jits)
    if (j.func && j.notPartitioned.empty() && !j.propagated.empty()) Partitioner(m, j).run();
}

} // namespace shmapc::passes
