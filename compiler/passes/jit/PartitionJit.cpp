// partitionJit: each @jit function, its shardings propagated, becomes a shmap: the
// function's body is replaced by one shmap equation whose in_specs / out_specs are its
// parameters' and results' shardings, and whose body computes each equation on the local
// blocks, in the sharding its factor rule asks of the operands (rules/Rules.h):
//
// - An operand held in another sharding is moved: axes that move from one dimension to
//   another by all_to_all; other dimensions whose axes differ are gathered
//   (all_gather_invariant over the axes they were sharded along), then sharded again by
//   slicing (pscatter: each device keeps its block, no communication).
//   A value is moved at its smallest shape, and once: one that only repeats its operand's
//   elements (a broadcast, a widening convert) as its operand where that is fewer bytes, the
//   equation computed again after (a splat made again); from the cheapest block of it the body already holds
//   (another use's, one gathered on a move's way); a loop's constant before the loop.
// - A reduced factor sharded along some axes (matmul's contracting dimension, a reduction's
//   axes) leaves each device a partial result: psum (pmax, pmin) over those axes finishes it,
//   or psum_scatter where a result dimension is to be sharded along the same axes (each device
//   computes that dimension whole from its shards; the sum comes split).
// - Which axes each factor is computed along (its result's, an operand's, none) is chosen so
//   that the bytes each device puts into collectives are fewest (chooseAxes).
// - A primitive computed whole takes its operands unsharded and gives its result unsharded; a
//   splat constant is made at its local shape.
// - Sub-axes: the shmap runs on the mesh split at them (SplitMesh, PartitionLayout.h). Uneven
//   dimensions: padded (blockSize). Loops and conditionals: their bodies partitioned too
//   (partitionNested).
//
// The shmap then goes through the pipeline as one the user wrote: variance inference (which
// types every value and inserts pbroadcasts), autodiff with the collectives' transposes, and the
// communication report.
#include "passes/jit/Partitioner.h"
#include "passes/jit/Jit.h"
#include "rules/Rules.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace shmapc::passes {

namespace partition {

void Partitioner::run() {
  body_ = m_.newFunc(f_.name + "_partitioned");
  made_.push_back(body_);
  body_->loc = f_.loc;
  body_->mesh = &split_.mesh();
  body_->isShmapBody = true;
  std::vector<PartitionSpec> inSpecs, outSpecs;
  const std::vector<Eqn> eqns = std::move(f_.eqns);
  f_.eqns.clear();  // (now the host's part: the parameters padded, the shmap, the results sliced)
  std::vector<Value *> ins;
  for (Value *p : f_.params) {
    std::vector<Refs> s = target(p);
    Value *local = body_->newValue(localType(p->type, s), p->hint);
    body_->params.push_back(local);
    held_[p] = {local, s, body_};
    inSpecs.push_back(specOf(s));
    Value *in = p;
    for (size_t d = 0; d < s.size(); ++d) in = pad(in, d, paddedType(p->type, s).shape[d], &f_);
    ins.push_back(in);
  }
  for (const Eqn &e : eqns) partition(e);
  at_ = f_.returnLoc.valid() ? f_.returnLoc : f_.loc;
  for (Value *r : f_.results) {
    std::vector<Refs> s = target(r);
    body_->results.push_back(moved(r, s));
    outSpecs.push_back(specOf(s));
  }
  body_->returnLoc = f_.returnLoc.valid() ? f_.returnLoc : f_.loc;
  dropUnread(made_);
  for (size_t i = 0; i < f_.results.size(); ++i) body_->outSpecLocs.push_back(j_.loc);

  Eqn call;
  call.prim = Prim::Shmap;
  call.loc = f_.loc;
  call.ins = ins;
  call.bodies = {body_};
  call.params["mesh"] = (int64_t)split_.index();
  call.params["in_specs"] = inSpecs;
  call.params["out_specs"] = outSpecs;
  std::vector<Value *> padded;
  for (Value *r : f_.results) padded.push_back(f_.newValue(paddedType(r->type, target(r)), r->hint));
  call.outs = padded;
  f_.eqns.push_back(std::move(call));
  for (size_t i = 0; i < padded.size(); ++i)
    for (size_t d = 0; d < padded[i]->type.shape.size(); ++d)
      padded[i] = unpad(padded[i], d, f_.results[i]->type.shape[d], &f_);
  f_.results = padded;
}

std::vector<Refs> Partitioner::target(const Value *v) {
  std::vector<Refs> out((size_t)v->type.rank());
  auto it = j_.propagated.find(v);
  if (it != j_.propagated.end())
    for (size_t d = 0; d < it->second.dims.size() && d < out.size(); ++d)
      out[d] = mergeSubAxes(it->second.dims[d].axes);
  return out;
}

PartitionSpec Partitioner::specOf(const std::vector<Refs> &dims) const {
  PartitionSpec p;
  for (const Refs &d : dims) p.dims.push_back(split_.axes(d));
  while (!p.dims.empty() && p.dims.back().empty()) p.dims.pop_back();
  return p;
}

std::vector<int64_t> Partitioner::axesParam(const Refs &refs) const {
  const std::vector<int> axes = split_.axes(refs);
  return std::vector<int64_t>(axes.begin(), axes.end());
}

Value *Partitioner::emit(Prim p, std::vector<Value *> ins, const Type &out, std::map<std::string, Attr> params, Loc loc,
                         Func *into) {
  // (checked against the rules, as every builder's equations are: a partitioning rule that
  // computes a block's type wrongly is an internal error here, not a wrong program)
  Func &f = into ? *into : *body_;
  f.eqns.push_back(rules::makeEqn(f, p, std::move(ins), std::move(params), loc, {.declared = &out, .untyped = true}));
  return f.eqns.back().outs[0];
}

Value *Partitioner::constant(double value, DType dtype, std::vector<int64_t> shape, Func *into) {
  return emit(Prim::Constant, {}, Type{dtype, std::move(shape), 0}, {{"value", std::vector<double>{value}}}, f_.loc,
              into);
}

Value *Partitioner::pad(Value *x, size_t d, int64_t size, Func *into) {
  if (x->type.shape[d] == size) return x;
  std::vector<int64_t> zeros = x->type.shape;
  zeros[d] = size - x->type.shape[d];
  Type t = x->type;
  t.vary = 0;
  t.shape[d] = size;
  return emit(Prim::Concatenate, {x, constant(0, x->type.dtype, zeros, into)}, t, {{"dimension", (int64_t)d}}, f_.loc,
              into);
}

Value *Partitioner::unpad(Value *x, size_t d, int64_t size, Func *into) {
  if (x->type.shape[d] == size) return x;
  const size_t rank = x->type.shape.size();
  std::vector<int64_t> start(rank, 0), limit = x->type.shape, strides(rank, 1);
  limit[d] = size;
  Type t = x->type;
  t.vary = 0;
  t.shape[d] = size;
  return emit(Prim::Slice, {x}, t, {{"start", start}, {"limit", limit}, {"strides", strides}}, f_.loc, into);
}

Value *Partitioner::maskPadding(Value *x, size_t d, const Refs &axes, int64_t n, double identity) {
  const std::vector<int64_t> &shape = x->type.shape;
  Value *at = indexAlong(shape, d, axes, shape[d], 0, f_.loc);
  Value *real = emit(Prim::Lt, {at, constant((double)n, DType::I32, shape)}, Type{DType::Bool, shape, 0}, {}, f_.loc);
  Type t = x->type;
  t.vary = 0;
  return emit(Prim::Select, {real, x, constant(identity, x->type.dtype, shape)}, t, {}, f_.loc);
}

std::vector<const Partitioner::Held *> Partitioner::blocks(const Value *v) const {
  std::vector<const Held *> out{&held_.at(v)};
  if (auto it = copies_.find(v); it != copies_.end())
    for (const Held &c : it->second)
      if (c.in == body_) out.push_back(&c);
  return out;
}

int64_t Partitioner::moveCost(const Value *v, const std::vector<Refs> &to) const {
  int64_t best = -1;
  for (const Held *h : blocks(v)) {
    const int64_t bytes = moveBytes(split_, v, h->dims, to);
    if (best < 0 || bytes < best) best = bytes;
  }
  if (auto r = repeats_.find(v); r != repeats_.end() && best > 0)
    best = std::min(best, repeatCost(*r->second, to));
  return best;
}

int64_t Partitioner::repeatCost(const Eqn &e, const std::vector<Refs> &to) const {
  return e.ins.empty() ? 0 : moveCost(e.ins[0], operandSharding(e, to));
}

Value *Partitioner::moved(const Value *v, const std::vector<Refs> &to) {
  const std::vector<const Held *> have = blocks(v);
  const Held *from = nullptr;
  int64_t best = -1;
  for (const Held *h : have) {
    if (h->dims == to) return h->local;
    const int64_t bytes = moveBytes(split_, v, h->dims, to);
    if (best < 0 || bytes < best) best = bytes, from = h;
  }
  const size_t first = body_->eqns.size();
  Value *x = nullptr;
  if (auto r = repeats_.find(v); r != repeats_.end() && best > 0 && repeatCost(*r->second, to) < best) {
    const Eqn &e = *r->second;
    std::vector<Value *> ins;
    if (!e.ins.empty()) ins.push_back(moved(e.ins[0], operandSharding(e, to)));
    x = emit(e.prim, ins, localType(v->type, to), e.params, at_);
    remade_.insert(x);
    droppable_.insert(held_.at(v).local);  // (unread now, where every use moved it so)
  } else {
    x = move(v, *from, to);
  }
  for (size_t i = first; i < body_->eqns.size(); ++i)
    for (const Value *o : body_->eqns[i].outs)
      if (!remade_.count(o)) droppable_.insert(o);
  copies_[v].push_back({x, to, body_});
  return x;
}

Value *Partitioner::move(const Value *v, const Held &h, const std::vector<Refs> &to) {
  Value *x = h.local;
  std::vector<Refs> now = h.dims;
  const std::vector<MoveStep> steps = planMove(split_, v, h.dims, to);
  for (size_t i = 0; i < steps.size(); ++i) {
    const MoveStep &s = steps[i];
    const size_t d = s.dim;
    Type t = x->type;
    t.vary = 0;
    if (s.prim == Prim::AllToAll) {
      x = pad(x, d, blockSize(v->type.shape[d], s.axes) * shardCount(s.axes));
      t = x->type;
      t.vary = 0;
      t.shape[s.from] *= shardCount(s.axes);
      t.shape[d] /= shardCount(s.axes);
      x = emit(Prim::AllToAll, {x}, t,
               {{"axes", axesParam(s.axes)},
                {"split_axis", (int64_t)d},
                {"concat_axis", (int64_t)s.from},
                {"tiled", (int64_t)1}},
               at_);
      x = unpad(x, s.from, v->type.shape[s.from]);
      now[d] = s.axes;
      now[s.from].clear();
    } else if (s.prim == Prim::AllGatherInvariant) {
      t.shape[d] *= shardCount(s.axes);
      x = emit(Prim::AllGatherInvariant, {x}, t,
               {{"axes", axesParam(s.axes)}, {"axis", (int64_t)d}, {"tiled", (int64_t)1}}, at_);
      x = unpad(x, d, v->type.shape[d]);
      now[d].clear();
    } else {
      const std::vector<int> all = split_.axes(s.axes);
      const std::vector<int64_t> rest(all.begin() + (ptrdiff_t)split_.axes(s.before).size(), all.end());
      x = pad(x, d, blockSize(v->type.shape[d], s.axes) * (shardCount(s.axes) / shardCount(s.before)));
      t = x->type;
      t.vary = 0;
      t.shape[d] = blockSize(v->type.shape[d], s.axes);
      x = emit(Prim::Pscatter, {x}, t, {{"axes", rest}, {"axis", (int64_t)d}, {"tiled", (int64_t)1}}, at_);
      now[d] = s.axes;
    }
    if (i + 1 < steps.size()) copies_[v].push_back({x, now, body_});
  }
  return x;
}

void Partitioner::partition(const Eqn &e) {
  at_ = e.loc;
  if (repeatsOperand(e)) repeats_[e.outs[0]] = &e;
  const rules::FactorRule rule = rules::rulesOf(e.prim).sharding(e);
  Eqn local = e;
  local.outs.clear();
  if (rule.kind == rules::FactorRule::Free) {
    const std::vector<Refs> s = target(e.outs[0]);
    Value *v = body_->newValue(localType(e.outs[0]->type, s), e.outs[0]->hint);
    local.outs = {v};
    body_->eqns.push_back(std::move(local));
    held_[e.outs[0]] = {v, s, body_};
    return;
  }
  if (rule.kind == rules::FactorRule::Replicated) {
    for (size_t i = 0; i < e.ins.size(); ++i)
      local.ins[i] = moved(e.ins[i], std::vector<Refs>((size_t)e.ins[i]->type.rank()));
    for (const Value *o : e.outs) {
      Type t = o->type;
      t.vary = 0;
      Value *v = body_->newValue(t, o->hint);
      local.outs.push_back(v);
      held_[o] = {v, std::vector<Refs>((size_t)o->type.rank()), body_};
    }
    body_->eqns.push_back(std::move(local));
    return;
  }
  if (rule.kind == rules::FactorRule::Nested) return partitionNested(e, rule, std::move(local));
  if (e.prim == Prim::Slice) return partitionSlice(e, rule);
  if (e.prim == Prim::Concatenate && partitionConcat(e)) return;
  partitionFactors(e, rule, std::move(local));
}

void Partitioner::partitionNested(const Eqn &e, const rules::FactorRule &rule, Eqn local) {
  std::map<const Value *, std::vector<Refs>> held;  // each tied value's sharding
  for (const std::vector<rules::Tied> &group : rule.ties) {
    const rules::Tied *by = &group[0];
    for (const rules::Tied &t : group)
      if (t.of == rules::Tied::Out || (t.of == rules::Tied::Param && by->of != rules::Tied::Out)) {
        by = &t;
        if (t.of == rules::Tied::Out) break;
      }
    const std::vector<Refs> s = target(rules::tiedValue(e, *by));
    for (const rules::Tied &t : group) held[rules::tiedValue(e, t)] = s;
  }
  auto shardingOf = [&](const Value *v) {
    auto it = held.find(v);
    return it != held.end() ? it->second : std::vector<Refs>((size_t)v->type.rank());
  };
  for (size_t i = 0; i < e.ins.size(); ++i) local.ins[i] = moved(e.ins[i], shardingOf(e.ins[i]));
  Func *outer = body_;
  for (size_t b = 0; b < e.bodies.size(); ++b) {
    const Func &from = *e.bodies[b];
    Func *to = m_.newFunc(from.name + "_partitioned");
    made_.push_back(to);
    to->loc = from.loc;
    to->mesh = &split_.mesh();
    to->isNested = true;
    to->returnLoc = from.returnLoc;
    for (const Value *p : from.params) {
      const std::vector<Refs> s = shardingOf(p);
      Value *v = to->newValue(localType(p->type, s), p->hint);
      to->params.push_back(v);
      held_[p] = {v, s, to};
    }
    body_ = to;
    for (const Eqn &inner : from.eqns) partition(inner);
    at_ = from.returnLoc.valid() ? from.returnLoc : e.loc;
    for (const Value *r : from.results) to->results.push_back(moved(r, shardingOf(r)));
    body_ = outer;
    local.bodies[b] = to;
  }
  if (e.prim == Prim::Loop || e.prim == Prim::While) hoistConstMoves(e, local);
  for (const Value *o : e.outs) {
    const std::vector<Refs> s = shardingOf(o);
    Value *v = body_->newValue(localType(o->type, s), o->hint);
    local.outs.push_back(v);
    held_[o] = {v, s, body_};
  }
  body_->eqns.push_back(std::move(local));
}

void Partitioner::hoistConstMoves(const Eqn &e, Eqn &local) {
  const size_t consts = (size_t)e.intParam("num_consts");
  const size_t first = e.prim == Prim::Loop ? 1 : 0;  // (a loop's body takes its index first)
  struct Hoist {
    size_t c;
    std::vector<Refs> dims;
    std::map<Func *, Value *> replaces;  // per body, the block the new parameter replaces
  };
  std::vector<Hoist> hoists;
  for (size_t b = 0; b < e.bodies.size(); ++b) {
    Func *to = local.bodies[b];
    std::set<const Value *> read(to->results.begin(), to->results.end());
    for (const Eqn &q : to->eqns)
      if (!std::all_of(q.outs.begin(), q.outs.end(), [&](const Value *o) { return droppable_.count(o); }))
        read.insert(q.ins.begin(), q.ins.end());
    for (size_t c = 0; c < consts; ++c) {
      const Value *p = e.bodies[b]->params[first + c];
      auto it = copies_.find(p);
      if (it == copies_.end()) continue;
      for (const Held &k : it->second) {
        if (k.in != to || !read.count(k.local) || moveBytes(split_, p, held_.at(p).dims, k.dims) == 0) continue;
        auto h =
            std::find_if(hoists.begin(), hoists.end(), [&](const Hoist &o) { return o.c == c && o.dims == k.dims; });
        if (h == hoists.end()) h = hoists.insert(hoists.end(), {c, k.dims, {}});
        h->replaces[to] = k.local;
      }
    }
  }
  size_t added = 0;
  for (const Hoist &h : hoists) {
    at_ = e.loc;
    local.ins.insert(local.ins.begin() + (ptrdiff_t)(consts + added), moved(e.ins[h.c], h.dims));
    for (size_t b = 0; b < local.bodies.size(); ++b) {
      Func *to = local.bodies[b];
      const Value *p = e.bodies[b]->params[first + h.c];
      Value *param = to->newValue(localType(p->type, h.dims), p->hint);
      to->params.insert(to->params.begin() + (ptrdiff_t)(first + consts + added), param);
      auto r = h.replaces.find(to);
      if (r == h.replaces.end()) continue;
      for (Eqn &q : to->eqns) std::replace(q.ins.begin(), q.ins.end(), r->second, param);
      std::replace(to->results.begin(), to->results.end(), r->second, param);
    }
    ++added;
  }
  // The constants no body reads now (each read moved, now passed in moved) are passed no more.
  dropUnread(local.bodies);
  size_t kept = consts + added;
  for (size_t c = kept; c-- > 0;) {
    bool read = false;
    for (const Func *to : local.bodies) {
      const Value *param = to->params[first + c];
      read = read || std::find(to->results.begin(), to->results.end(), param) != to->results.end();
      for (const Eqn &q : to->eqns) read = read || std::find(q.ins.begin(), q.ins.end(), param) != q.ins.end();
    }
    if (read) continue;
    local.ins.erase(local.ins.begin() + (ptrdiff_t)c);
    for (Func *to : local.bodies) to->params.erase(to->params.begin() + (ptrdiff_t)(first + c));
    --kept;
  }
  local.params["num_consts"] = (int64_t)kept;
}

void Partitioner::partitionFactors(const Eqn &e, const rules::FactorRule &rule, Eqn local) {
  std::vector<std::vector<Refs>> outs;
  for (const Value *o : e.outs) outs.push_back(target(o));
  std::vector<Refs> axes = chooseAxes(e, rule, outs);
  for (size_t k = 0; k < rule.factors.size(); ++k)  // (a reshape's part is never padded)
    if (rule.factors[k].size && rule.factors[k].size % shardCount(axes[k]) != 0) axes[k].clear();
  keepWholeParts(rule, axes);
  Assignment a = assign(e, rule, std::move(axes), outs);
  for (size_t i = 0; i < e.ins.size(); ++i) local.ins[i] = moved(e.ins[i], a.want[i]);
  for (size_t k = 0; k < rule.factors.size(); ++k) {  // (a reduction over padding)
    const rules::Factor &f = rule.factors[k];
    if (!f.outs.empty() || a.axes[k].empty()) continue;
    for (const rules::DimRef &r : f.ins) {
      const Value *in = e.ins[(size_t)r.value];
      if (!even(in->type.shape[(size_t)r.dim], a.axes[k]))
        local.ins[(size_t)r.value] = maskPadding(local.ins[(size_t)r.value], (size_t)r.dim, a.axes[k],
                                                 in->type.shape[(size_t)r.dim], identity(f.combine, in->type.dtype));
    }
  }
  for (size_t o = 0; o < e.outs.size(); ++o)
    local.outs.push_back(body_->newValue(localType(e.outs[o]->type, a.result[o]), e.outs[o]->hint));
  if (rule.localize) rule.localize(e, local);
  const std::vector<Value *> outsLocal = local.outs;
  Value *out = outsLocal[0];
  body_->eqns.push_back(std::move(local));
  if (a.scatterFactor >= 0) {
    const Refs &by = a.axes[(size_t)a.scatterFactor];
    Type t = out->type;
    t.shape[(size_t)a.scatterDim] /= shardCount(by);
    out = emit(Prim::PsumScatter, {out}, t,
               {{"axes", axesParam(by)}, {"scatter_dimension", (int64_t)a.scatterDim}, {"tiled", (int64_t)1}}, e.loc);
    a.result[0][(size_t)a.scatterDim] = by;
  }
  // The other reduced factors finished by one collective each kind, over all their axes (a
  // sum over two sharded dimensions is one psum over both, not a psum per dimension).
  std::vector<std::pair<Prim, std::vector<int64_t>>> finish;
  for (size_t k = 0; k < rule.factors.size(); ++k) {
    const rules::Factor &f = rule.factors[k];
    if (!f.outs.empty() || a.axes[k].empty() || (int)k == a.scatterFactor) continue;
    auto same = std::find_if(finish.begin(), finish.end(), [&](const auto &c) { return c.first == f.combine; });
    if (same == finish.end()) same = finish.insert(finish.end(), {f.combine, {}});
    const std::vector<int64_t> more = axesParam(a.axes[k]);
    same->second.insert(same->second.end(), more.begin(), more.end());
  }
  for (auto &[combine, list] : finish) {
    std::sort(list.begin(), list.end());  // (in mesh order, as a spec names them)
    out = emit(combine, {out}, out->type, {{"axes", list}}, e.loc);
  }
  held_[e.outs[0]] = {out, a.result[0], body_};
  for (size_t o = 1; o < e.outs.size(); ++o) held_[e.outs[o]] = {outsLocal[o], a.result[o], body_};
}

void Partitioner::dropUnread(const std::vector<Func *> &bodies) {
  for (bool dropped = true; dropped;) {
    dropped = false;
    std::set<const Value *> read;
    for (const Func *f : bodies) {
      read.insert(f->results.begin(), f->results.end());
      for (const Eqn &e : f->eqns) read.insert(e.ins.begin(), e.ins.end());
    }
    for (Func *f : bodies)
      for (size_t i = f->eqns.size(); i-- > 0;) {
        const std::vector<Value *> &outs = f->eqns[i].outs;
        if (outs.empty() || !std::all_of(outs.begin(), outs.end(), [&](const Value *o) {
              return droppable_.count(o) && !read.count(o);
            }))
          continue;
        f->eqns.erase(f->eqns.begin() + (ptrdiff_t)i);
        dropped = true;
      }
  }
}

} // namespace partition

namespace {

using namespace ir;

// A partition spec of the shmap a jit function became that names a mesh axis twice: a
// compiler bug (sema refuses a written sharding that does, and propagation never gives an
// axis to two dimensions of a value), reported here at the jit function as an internal error
// rather than by the runtime when the shmap starts.
void checkSpecs(const JitFunc &j, const Diagnostics &diags) {
  for (const Eqn &e : j.func->eqns) {
    if (e.prim != Prim::Shmap || e.bodies.empty() || !e.bodies[0]->mesh) continue;
    const Mesh &mesh = *e.bodies[0]->mesh;
    for (const char *kind : {"in_specs", "out_specs"}) {
      const std::vector<PartitionSpec> &specs = e.specsParam(kind);
      for (size_t k = 0; k < specs.size(); ++k) {
        std::set<int> seen;
        for (const std::vector<int> &dim : specs[k].dims)
          for (int a : dim) {
            if (seen.insert(a).second) continue;
            std::string where;
            if (j.loc.valid())
              where = diags.sources().file(j.loc.file).path + ":" + std::to_string(j.loc.line) + ":" +
                      std::to_string(j.loc.col) + ": ";
            throw InternalError(where + "partitioning @jit function " + j.name + " made the partition spec " +
                                specToString(specs[k], mesh) + " (" + kind + " " + std::to_string(k) +
                                "), which names mesh axis \"" + mesh.axes[(size_t)a] + "\" twice");
          }
      }
    }
  }
}

// The functions a jvp or vjp differentiates, and those they call or nest, transitively.
std::set<const Func *> differentiatedFuncs(const Module &m) {
  std::set<const Func *> found;
  std::vector<const Func *> work;
  for (const auto &f : m.funcs)
    for (const Eqn &e : f->eqns)
      if ((e.prim == Prim::Jvp || e.prim == Prim::Vjp) && !e.bodies.empty()) work.push_back(e.bodies[0]);
  while (!work.empty()) {
    const Func *f = work.back();
    work.pop_back();
    if (!f || !found.insert(f).second) continue;
    for (const Eqn &e : f->eqns) work.insert(work.end(), e.bodies.begin(), e.bodies.end());
  }
  return found;
}

} // namespace

void partitionJit(Module &m, Diagnostics &diags) {
  const std::set<const Func *> differentiated = differentiatedFuncs(m);
  for (JitFunc &j : m.jits)
    if (j.func && j.notPartitioned.empty() && !j.propagated.empty()) {
      partition::Partitioner(m, j, differentiated.count(j.func) > 0).run();
      checkSpecs(j, diags);
    }
}

} // namespace shmapc::passes
