// partitionJit (issue 13): each @jit function, its shardings propagated, becomes a shmap: the
// function's body is replaced by one shmap equation whose in_specs / out_specs are its
// parameters' and results' shardings, and whose body computes each equation on the local
// blocks, in the sharding its factor rule asks of the operands (prims/Rules.h):
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
// types every value and inserts pbroadcasts), autodiff with seed 000's transposes, and the
// communication report.
#include "passes/PartitionLayout.h"
#include "passes/Passes.h"
#include "prims/Rules.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace shmapc::passes {

namespace {

using namespace ir;
using namespace layout;

class Partitioner {
public:
  // differentiated: the function is under grad (vjp / jvp), so its choices count the bytes its
  // backward pass will move too.
  Partitioner(Module &m, JitFunc &j, bool differentiated)
      : m_(m), j_(j), f_(*j.func), split_(m, j), differentiated_(differentiated) {}

  void run() {
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

private:
  struct Held {
    Value *local;
    std::vector<Refs> dims;
    Func *in;  // the body it is in
  };

  // The sharding propagation chose for v (unsharded if none).
  std::vector<Refs> target(const Value *v) {
    std::vector<Refs> out((size_t)v->type.rank());
    auto it = j_.propagated.find(v);
    if (it != j_.propagated.end())
      for (size_t d = 0; d < it->second.dims.size() && d < out.size(); ++d) out[d] = mergeSubAxes(it->second.dims[d].axes);
    return out;
  }

  PartitionSpec specOf(const std::vector<Refs> &dims) const {
    PartitionSpec p;
    for (const Refs &d : dims) p.dims.push_back(split_.axes(d));
    while (!p.dims.empty() && p.dims.back().empty()) p.dims.pop_back();
    return p;
  }

  std::vector<int64_t> axesParam(const Refs &refs) const {
    const std::vector<int> axes = split_.axes(refs);
    return std::vector<int64_t>(axes.begin(), axes.end());
  }

  Value *emit(Prim p, std::vector<Value *> ins, const Type &out, std::map<std::string, Attr> params, Loc loc,
              Func *into = nullptr) {
    Eqn e;
    e.prim = p;
    e.ins = std::move(ins);
    e.params = std::move(params);
    e.loc = loc;
    Func &f = into ? *into : *body_;
    Value *v = f.newValue(out);
    e.outs = {v};
    f.eqns.push_back(std::move(e));
    return v;
  }

  Value *constant(double value, DType dtype, std::vector<int64_t> shape, Func *into = nullptr) {
    return emit(Prim::Constant, {}, Type{dtype, std::move(shape), 0}, {{"value", std::vector<double>{value}}}, f_.loc,
                into);
  }

  // x with dimension d padded with zeros at its end to `size`.
  Value *pad(Value *x, size_t d, int64_t size, Func *into = nullptr) {
    if (x->type.shape[d] == size) return x;
    std::vector<int64_t> zeros = x->type.shape;
    zeros[d] = size - x->type.shape[d];
    Type t = x->type;
    t.vary = 0;
    t.shape[d] = size;
    return emit(Prim::Concatenate, {x, constant(0, x->type.dtype, zeros, into)}, t, {{"dimension", (int64_t)d}}, f_.loc,
                into);
  }

  // x's first `size` elements along dimension d.
  Value *unpad(Value *x, size_t d, int64_t size, Func *into = nullptr) {
    if (x->type.shape[d] == size) return x;
    const size_t rank = x->type.shape.size();
    std::vector<int64_t> start(rank, 0), limit = x->type.shape, strides(rank, 1);
    limit[d] = size;
    Type t = x->type;
    t.vary = 0;
    t.shape[d] = size;
    return emit(Prim::Slice, {x}, t, {{"start", start}, {"limit", limit}, {"strides", strides}}, f_.loc, into);
  }

  // x (a local block of a value whose dimension d, of global size n, is split unevenly along
  // `axes`) with its padding set to `identity`: where the block's offset plus the index along
  // d is n or more.
  Value *maskPadding(Value *x, size_t d, const Refs &axes, int64_t n, double identity) {
    const std::vector<int64_t> &shape = x->type.shape;
    Value *index = emit(Prim::AxisIndex, {}, Type{DType::I32, {}, 0}, {{"axes", axesParam(axes)}}, f_.loc);
    Value *offset = emit(Prim::Mul, {index, constant((double)shape[d], DType::I32, {})}, Type{DType::I32, {}, 0}, {},
                         f_.loc);
    Value *offsets = emit(Prim::BroadcastInDim, {offset}, Type{DType::I32, shape, 0},
                          {{"broadcast_dimensions", std::vector<int64_t>{}}}, f_.loc);
    Value *iota = emit(Prim::Iota, {}, Type{DType::I32, shape, 0}, {{"dimension", (int64_t)d}}, f_.loc);
    Value *at = emit(Prim::Add, {iota, offsets}, Type{DType::I32, shape, 0}, {}, f_.loc);
    Value *real = emit(Prim::Lt, {at, constant((double)n, DType::I32, shape)}, Type{DType::Bool, shape, 0}, {}, f_.loc);
    Type t = x->type;
    t.vary = 0;
    return emit(Prim::Select, {real, x, constant(identity, x->type.dtype, shape)}, t, {}, f_.loc);
  }

  // The blocks of v this body holds: the one it was made in, and each other sharding a move
  // made (another use's, or one on a move's way: gathered whole before a pscatter).
  std::vector<const Held *> blocks(const Value *v) const {
    std::vector<const Held *> out{&held_.at(v)};
    if (auto it = copies_.find(v); it != copies_.end())
      for (const Held &c : it->second)
        if (c.in == body_) out.push_back(&c);
    return out;
  }

  // The bytes a device puts into collectives to have v in sharding `to` in this body: moved
  // from the block of it that costs fewest (moveBytes), or, where v only repeats its operand's
  // elements (a broadcast), its operand moved and the equation computed again on the block (a
  // splat made again in `to`: nothing).
  int64_t moveCost(const Value *v, const std::vector<Refs> &to) const {
    int64_t best = -1;
    for (const Held *h : blocks(v)) {
      const int64_t bytes = moveBytes(split_, v, h->dims, to);
      if (best < 0 || bytes < best) best = bytes;
    }
    if (auto r = repeats_.find(v); r != repeats_.end() && best > 0)
      best = std::min(best, repeatCost(*r->second, to));
    return best;
  }

  // Of a repeating equation's result in `to`: its operand's moveCost.
  int64_t repeatCost(const Eqn &e, const std::vector<Refs> &to) const {
    return e.ins.empty() ? 0 : moveCost(e.ins[0], operandSharding(e, to));
  }

  // v's local value in sharding `to` (planMove's steps; an uneven dimension padded before it
  // is split and sliced to its size after it is gathered), made the way moveCost counts: a
  // block already in `to` read again, else moved from the block that puts in fewest bytes (at
  // equal bytes the one v was made in), else its operand's block moved and repeated.
  Value *moved(const Value *v, const std::vector<Refs> &to) {
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

  // v's block h moved to `to` in this body; each block on the way kept as a copy of v.
  Value *move(const Value *v, const Held &h, const std::vector<Refs> &to) {
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
                 {{"axes", axesParam(s.axes)}, {"split_axis", (int64_t)d}, {"concat_axis", (int64_t)s.from}, {"tiled", (int64_t)1}},
                 at_);
        x = unpad(x, s.from, v->type.shape[s.from]);
        now[d] = s.axes;
        now[s.from].clear();
      } else if (s.prim == Prim::AllGatherInvariant) {
        t.shape[d] *= shardCount(s.axes);
        x = emit(Prim::AllGatherInvariant, {x}, t, {{"axes", axesParam(s.axes)}, {"axis", (int64_t)d}, {"tiled", (int64_t)1}},
                 at_);
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

  void partition(const Eqn &e) {
    at_ = e.loc;
    if (repeatsOperand(e)) repeats_[e.outs[0]] = &e;
    const prims::FactorRule rule = prims::rulesOf(e.prim).sharding(e);
    Eqn local = e;
    local.outs.clear();
    if (rule.kind == prims::FactorRule::Free) {
      const std::vector<Refs> s = target(e.outs[0]);
      Value *v = body_->newValue(localType(e.outs[0]->type, s), e.outs[0]->hint);
      local.outs = {v};
      body_->eqns.push_back(std::move(local));
      held_[e.outs[0]] = {v, s, body_};
      return;
    }
    if (rule.kind == prims::FactorRule::Replicated) {
      for (size_t i = 0; i < e.ins.size(); ++i) local.ins[i] = moved(e.ins[i], std::vector<Refs>((size_t)e.ins[i]->type.rank()));
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
    if (rule.kind == prims::FactorRule::Nested) return partitionNested(e, rule, std::move(local));
    if (e.prim == Prim::Slice) return partitionSlice(e, rule);
    partitionFactors(e, rule, std::move(local));
  }

  // A loop or conditional: each tied group held in one sharding (its result's, else what its
  // bodies' parameters have), the operands moved to it, the bodies partitioned into new
  // bodies on the local blocks, their results moved to it; an operand, parameter or result in
  // no group (a predicate, a loop's index) unsharded.
  void partitionNested(const Eqn &e, const prims::FactorRule &rule, Eqn local) {
    std::map<const Value *, std::vector<Refs>> held;  // each tied value's sharding
    for (const std::vector<prims::Tied> &group : rule.ties) {
      const prims::Tied *by = &group[0];
      for (const prims::Tied &t : group)
        if (t.of == prims::Tied::Out || (t.of == prims::Tied::Param && by->of != prims::Tied::Out)) {
          by = &t;
          if (t.of == prims::Tied::Out) break;
        }
      const std::vector<Refs> s = target(prims::tiedValue(e, *by));
      for (const prims::Tied &t : group) held[prims::tiedValue(e, t)] = s;
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

  // A loop's constants are the same in every iteration: a block of one that a body moved with
  // communication (and reads other than to move it on) is moved once before the loop instead,
  // and passed in as one more constant, which the body reads in its place. A conditional's
  // branches keep their moves (one runs; moving before it would move for the other too).
  void hoistConstMoves(const Eqn &e, Eqn &local) {
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
          auto h = std::find_if(hoists.begin(), hoists.end(), [&](const Hoist &o) { return o.c == c && o.dims == k.dims; });
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

  // The axes of the part of `dims`' dimension r is (its whole dimension, or a reshape's part).
  static Refs partOf(const std::vector<Refs> &dims, const prims::DimRef &r, const prims::Factor &f) {
    return f.size ? projectAxes(dims[(size_t)r.dim], r.pre, f.size) : dims[(size_t)r.dim];
  }

  // What computing an equation with each factor along given axes asks: the operands'
  // shardings, the local result's, and whether a reduced factor is finished by psum_scatter
  // (a result dimension is to be sharded along its axes and is computed whole: the reduce-
  // scatter matmul, Tmp[B_X, F_Y] *F W[F_Y, D] -> Out[B_X, D_Y]).
  struct Assignment {
    std::vector<Refs> axes;                         // each factor's
    std::vector<std::vector<Refs>> want, result;
    int scatterFactor = -1, scatterDim = -1;
  };

  Assignment assign(const Eqn &e, const prims::FactorRule &rule, std::vector<Refs> axes,
                    const std::vector<std::vector<Refs>> &outs) const {
    Assignment a;
    a.want.resize(e.ins.size());
    for (size_t i = 0; i < e.ins.size(); ++i) a.want[i].resize((size_t)e.ins[i]->type.rank());
    a.result.resize(e.outs.size());
    for (size_t o = 0; o < e.outs.size(); ++o) a.result[o].resize((size_t)e.outs[o]->type.rank());
    for (size_t k = 0; k < rule.factors.size(); ++k) {
      for (const prims::DimRef &r : rule.factors[k].ins) {
        Refs &d = a.want[(size_t)r.value][(size_t)r.dim];
        d.insert(d.end(), axes[k].begin(), axes[k].end());
      }
      for (const prims::DimRef &r : rule.factors[k].outs) {
        Refs &d = a.result[(size_t)r.value][(size_t)r.dim];
        d.insert(d.end(), axes[k].begin(), axes[k].end());
      }
    }
    for (auto *list : {&a.want, &a.result})
      for (std::vector<Refs> &dims : *list)
        for (Refs &d : dims) d = mergeSubAxes(d);
    for (size_t k = 0; k < rule.factors.size() && e.outs.size() == 1 && a.scatterFactor < 0; ++k) {
      const prims::Factor &f = rule.factors[k];
      if (!f.outs.empty() || axes[k].empty() || f.combine != Prim::Psum) continue;
      for (size_t d = 0; d < outs[0].size(); ++d)
        if (outs[0][d] == axes[k] && a.result[0][d].empty() && even(e.outs[0]->type.shape[d], axes[k])) {
          a.scatterFactor = (int)k, a.scatterDim = (int)d;
          break;
        }
    }
    a.axes = std::move(axes);
    return a;
  }

  // The bytes a device puts into collectives for an assignment: moving the operands, finishing
  // the reduced factors (psum_scatter, then one psum / pmax / pmin each), moving the result to
  // its sharding.
  int64_t cost(const Eqn &e, const prims::FactorRule &rule, const Assignment &a,
               const std::vector<std::vector<Refs>> &outs) const {
    int64_t bytes = 0;
    for (size_t i = 0; i < e.ins.size(); ++i) bytes += moveCost(e.ins[i], a.want[i]);
    std::vector<Refs> at = a.result[0];
    if (a.scatterFactor >= 0) {
      bytes += localBytes(e.outs[0], at);
      at[(size_t)a.scatterDim] = a.axes[(size_t)a.scatterFactor];
    }
    std::set<Prim> combines;
    for (size_t k = 0; k < rule.factors.size(); ++k)
      if (rule.factors[k].outs.empty() && !a.axes[k].empty() && (int)k != a.scatterFactor)
        combines.insert(rule.factors[k].combine);
    bytes += (int64_t)combines.size() * localBytes(e.outs[0], at);
    return bytes + moveBytes(split_, e.outs[0], at, outs[0]);
  }

  // The bytes the backward pass of an assignment puts into collectives, by the transposes of
  // what it does: an operand's cotangent is summed (psum2) over the axes the local product
  // varies along (every factor's) but the operand's block does not (it was invariant there:
  // gathered, or replicated), then moved back to the operand's sharding (a gather's transpose
  // is a slice, a slice's a gather); a psum_scatter's transpose is an all_gather, a psum's a
  // pbroadcast (nothing); the result's move is reversed. Only arrays of floats have
  // cotangents.
  int64_t backwardCost(const Eqn &e, const Assignment &a, const std::vector<std::vector<Refs>> &outs) const {
    Refs varies;
    for (const Refs &axes : a.axes) varies.insert(varies.end(), axes.begin(), axes.end());
    int64_t bytes = 0;
    for (size_t i = 0; i < e.ins.size(); ++i) {
      if (!isFloat(e.ins[i]->type.dtype)) continue;
      auto in = [](const std::vector<Refs> &dims, const AxisRef &r) {
        for (const Refs &d : dims)
          if (std::any_of(d.begin(), d.end(), [&](const AxisRef &h) { return h.overlaps(r); })) return true;
        return false;
      };
      const std::vector<Refs> &held = held_.at(e.ins[i]).dims;
      Refs summed;  // (the axes the product varies along and the operand's block does not)
      for (const AxisRef &r : varies)
        if (!in(a.want[i], r)) summed.push_back(r);
      const int64_t back = moveBytes(split_, e.ins[i], a.want[i], held);
      // (a gather's transpose keeps a block; where it was gathered along axes other than
      // those summed, the sum is made on the block: sink-reductions)
      bool sunk = back == 0;
      for (const Refs &d : held)
        for (const AxisRef &g : d) sunk = sunk && (in(a.want[i], g) || !in({summed}, g));
      if (!summed.empty()) bytes += localBytes(e.ins[i], sunk ? held : a.want[i]);
      bytes += back;
    }
    if (!isFloat(e.outs[0]->type.dtype)) return bytes;
    std::vector<Refs> at = a.result[0];
    if (a.scatterFactor >= 0) {
      at[(size_t)a.scatterDim] = a.axes[(size_t)a.scatterFactor];
      bytes += localBytes(e.outs[0], at);
    }
    return bytes + moveBytes(split_, e.outs[0], outs[0], at);
  }

  // The axes each factor is computed along: of each factor's candidates (its result
  // dimension's sharding, each operand's, none), the assignment that puts the fewest bytes
  // into collectives, no axis used by two factors; at equal bytes the earliest (a factor with
  // a result dimension in the result's sharding, a reduced one in its first operand's). So of
  // a * b with a held {"z", "y"}, b {"z"} and the result to be whole, the product is computed
  // split and gathered once; of lhs[B_X, D_Y] @ rhs[D, F_Y] -> [B_X, F_Y] lhs is gathered
  // over Y (seed 002's collective matmul baseline) rather than rhs moved and the result
  // reduce-scattered. A reshape's parts keep the result's (its dimensions split or merged).
  std::vector<Refs> chooseAxes(const Eqn &e, const prims::FactorRule &rule,
                               const std::vector<std::vector<Refs>> &outs) const {
    std::vector<std::vector<Refs>> candidates(rule.factors.size());
    bool parts = false;
    for (size_t k = 0; k < rule.factors.size(); ++k) {
      const prims::Factor &f = rule.factors[k];
      parts = parts || f.size;
      auto add = [&](const Refs &c) {
        if (std::find(candidates[k].begin(), candidates[k].end(), c) == candidates[k].end()) candidates[k].push_back(c);
      };
      if (!f.outs.empty()) add(partOf(outs[(size_t)f.outs[0].value], f.outs[0], f));
      for (const prims::DimRef &r : f.ins) add(partOf(held_.at(e.ins[(size_t)r.value]).dims, r, f));
      add({});
    }
    std::vector<size_t> pick(rule.factors.size(), 0);
    auto axesOf = [&](const std::vector<size_t> &p) {
      std::vector<Refs> axes;
      for (size_t k = 0; k < p.size(); ++k) axes.push_back(candidates[k][p[k]]);
      return axes;
    };
    auto valid = [&](const std::vector<Refs> &axes) {
      Refs seen;
      for (const Refs &a : axes)
        for (const AxisRef &r : a) {
          if (std::any_of(seen.begin(), seen.end(), [&](const AxisRef &s) { return s.overlaps(r); })) return false;
          seen.push_back(r);
        }
      return true;
    };
    int64_t combinations = 1;
    for (const auto &c : candidates) combinations *= (int64_t)c.size();
    if (parts || combinations > 4096) {  // (the first candidates, a reduced factor's if free)
      std::vector<Refs> axes = axesOf(pick);
      for (size_t k = 0; k < axes.size(); ++k) {
        if (!rule.factors[k].outs.empty()) continue;
        std::vector<Refs> without = axes;
        without[k].clear();
        if (!valid(axes)) axes = without;
      }
      return axes;
    }
    // (each valid assignment: its axes, forward bytes, backward bytes, and how many ways it
    // splits the work: the product of its factors' shard counts)
    struct Scored {
      std::vector<Refs> axes;
      int64_t forward, backward, split;
    };
    std::vector<Scored> scored;
    for (int64_t n = 0; n < combinations; ++n) {
      int64_t rest = n;
      for (size_t k = 0; k < pick.size(); ++k) {
        pick[k] = (size_t)(rest % (int64_t)candidates[k].size());
        rest /= (int64_t)candidates[k].size();
      }
      std::vector<Refs> axes = axesOf(pick);
      if (!valid(axes)) continue;
      const Assignment a = assign(e, rule, axes, outs);
      int64_t split = 1;
      for (const Refs &k : axes) split *= shardCount(k);
      scored.push_back({std::move(axes), cost(e, rule, a, outs), differentiated_ ? backwardCost(e, a, outs) : 0, split});
    }
    // The fewest forward bytes; under grad, the fewest forward plus backward bytes among the
    // assignments that split the work at least as finely as that one (so the backward's
    // gradient sums are weighed against gathers, never avoided by computing whole on every
    // device what was split), at equal bytes the fewer forward bytes, then the earliest.
    const Scored *fastest = nullptr;
    for (const Scored &s : scored)
      if (!fastest || s.forward < fastest->forward) fastest = &s;
    if (!fastest) return {};
    const Scored *best = fastest;
    for (const Scored &s : scored)
      if (s.split >= fastest->split && (s.forward + s.backward < best->forward + best->backward ||
                                        (s.forward + s.backward == best->forward + best->backward && s.forward < best->forward)))
        best = &s;
    return best->axes;
  }

  // Each factor computed along the axes chooseAxes picks; the operands moved to them.
  void partitionFactors(const Eqn &e, const prims::FactorRule &rule, Eqn local) {
    std::vector<std::vector<Refs>> outs;
    for (const Value *o : e.outs) outs.push_back(target(o));
    std::vector<Refs> axes = chooseAxes(e, rule, outs);
    for (size_t k = 0; k < rule.factors.size(); ++k)  // (a reshape's part is never padded)
      if (rule.factors[k].size && rule.factors[k].size % shardCount(axes[k]) != 0) axes[k].clear();
    keepWholeParts(rule, axes);
    Assignment a = assign(e, rule, std::move(axes), outs);
    for (size_t i = 0; i < e.ins.size(); ++i) local.ins[i] = moved(e.ins[i], a.want[i]);
    for (size_t k = 0; k < rule.factors.size(); ++k) {  // (a reduction over padding)
      const prims::Factor &f = rule.factors[k];
      if (!f.outs.empty() || a.axes[k].empty()) continue;
      for (const prims::DimRef &r : f.ins) {
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
      const prims::Factor &f = rule.factors[k];
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

  // The equations of moves (and blocks made again from their operands) whose results nothing
  // reads, dropped: a broadcast every use of which broadcasts its moved operand instead, a
  // move out of a loop's body that the loop now gets from outside.
  // (Only in bodies done: a block moved earlier in a body being partitioned may be read by a
  // later use.)
  void dropUnread(const std::vector<Func *> &bodies) {
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

  // How a slice computes one dimension on the local blocks.
  struct SliceDim {
    enum Mode {
      Whole,  // not cut: the operand's and the result's dimension along `axes`
      Cut,    // cut, computed unsharded (the operand's dimension gathered first)
      Shift,  // cut with stride 1, the operand and the result along `axes`: each device's
              // result block from its own operand block and a halo from its neighbours
      Mask,   // cut with stride 1, the operand along `axes` and the result unsharded: each
              // device puts its block's part of the result into zeros, a psum adds them
      Thin,   // cut with a stride that divides the operand's blocks along `axes`: each device
              // takes every stride-th element of its block (the same offset in every block),
              // the pieces are gathered, and the result cut from them
    } mode;
    Refs axes;
  };

  // The halo a Shift dimension needs: the operand's dimension of size n (start s, result
  // size o) split along `axes` into blocks of bi, the result's into blocks of bo. Device k's
  // result block starts at s + k * bo, which is off_k = s + k * (bo - bi) into its own
  // block: it needs `left` elements from the block before and `right` from the one after
  // (none from farther: `fits`).
  struct Halo {
    int64_t left = 0, right = 0, inBlock = 0, outBlock = 0;
    bool fits = true;
  };
  static Halo haloOf(int64_t n, int64_t s, int64_t o, const Refs &axes) {
    Halo h;
    h.inBlock = blockSize(n, axes), h.outBlock = blockSize(o, axes);
    for (int64_t k = 0; k < shardCount(axes); ++k) {
      const int64_t off = s + k * (h.outBlock - h.inBlock);
      h.left = std::max(h.left, -off);
      h.right = std::max(h.right, off + h.outBlock - h.inBlock);
    }
    h.fits = h.left <= h.inBlock && h.right <= h.inBlock;
    return h;
  }

  // The operand's and the result's shardings of a slice computed so.
  static std::pair<std::vector<Refs>, std::vector<Refs>> sliceShardings(const std::vector<SliceDim> &dims) {
    std::vector<Refs> want, result;
    for (const SliceDim &d : dims) {
      want.push_back(d.mode == SliceDim::Cut ? Refs{} : d.axes);
      result.push_back(d.mode == SliceDim::Whole || d.mode == SliceDim::Shift ? d.axes : Refs{});
    }
    return {want, result};
  }

  // The bytes a device puts into collectives to compute slice e so: moving the operand, the
  // halos, the psum of masked dimensions, moving the result to its sharding.
  int64_t sliceCost(const Eqn &e, const std::vector<SliceDim> &dims, const std::vector<Refs> &to) const {
    const auto [want, result] = sliceShardings(dims);
    const Value *x = e.ins[0];
    int64_t bytes = moveCost(x, want);
    std::vector<int64_t> shape = localType(x->type, want).shape;
    const std::vector<int64_t> &start = e.intsParam("start"), &out = e.outs[0]->type.shape;
    const size_t rank = shape.size();
    auto elements = [&](size_t except) {
      int64_t n = 1;
      for (size_t k = 0; k < shape.size(); ++k) n *= k == except ? 1 : shape[k];
      return n;
    };
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d].mode == SliceDim::Cut) shape[d] = out[d];
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d].mode == SliceDim::Thin) {
        shape[d] /= e.intsParam("strides")[d];
        bytes += elements(rank) * dtypeSize(x->type.dtype);
        shape[d] = out[d];
      }
    bool masked = false;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d].mode == SliceDim::Shift) {
        const Halo h = haloOf(x->type.shape[d], start[d], out[d], dims[d].axes);
        bytes += (h.left + h.right) * elements(d) * dtypeSize(x->type.dtype);
        shape[d] = h.outBlock;
      } else if (dims[d].mode == SliceDim::Mask) {
        shape[d] = out[d];
        masked = true;
      }
    }
    if (masked) bytes += elements(rank) * dtypeSize(x->type.dtype);
    return bytes + moveBytes(split_, e.outs[0], result, to);
  }

  // A slice: each dimension computed whole, cut unsharded, shifted or masked (SliceDim),
  // whichever puts the fewest bytes into collectives (at equal bytes the earlier candidate:
  // the result's sharding, then the operand's), no axis used by two dimensions. So a[1:7]
  // of an f32[8] split in two moves nothing (each device's [3] block lies in its [4] one),
  // and a column of a matrix whose columns are split is summed from the devices that hold
  // it rather than gathered with the others.
  void partitionSlice(const Eqn &e, const prims::FactorRule &rule) {
    const Value *x = e.ins[0];
    const std::vector<Refs> to = target(e.outs[0]), &now = held_.at(x).dims;
    const size_t rank = x->type.shape.size();
    const std::vector<int64_t> &start = e.intsParam("start"), &limit = e.intsParam("limit");
    std::vector<std::vector<SliceDim>> candidates(rank);
    for (size_t d = 0; d < rank; ++d) {
      const prims::Factor *f = nullptr;
      for (const prims::Factor &g : rule.factors)
        if (g.ins[0].dim == (int)d) f = &g;
      auto add = [&](SliceDim c) {
        for (const SliceDim &o : candidates[d])
          if (o.mode == c.mode && o.axes == c.axes) return;
        candidates[d].push_back(std::move(c));
      };
      if (f && !f->shifted) {
        for (const Refs &a : {to[d], now[d], Refs{}}) add({SliceDim::Whole, a});
        continue;
      }
      if (f) {
        for (const Refs &a : {to[d], now[d]})
          if (!a.empty() && haloOf(x->type.shape[d], start[d], limit[d] - start[d], a).fits) add({SliceDim::Shift, a});
        if (!now[d].empty()) add({SliceDim::Mask, now[d]});
      }
      const int64_t stride = e.intsParam("strides")[d];
      if (!f && !now[d].empty() && blockSize(x->type.shape[d], now[d]) % stride == 0) add({SliceDim::Thin, now[d]});
      add({SliceDim::Cut, {}});
    }
    int64_t combinations = 1;
    for (const auto &c : candidates) combinations *= (int64_t)c.size();
    std::vector<SliceDim> best;
    int64_t bestBytes = -1;
    for (int64_t n = 0; n < std::min<int64_t>(combinations, 4096); ++n) {
      std::vector<SliceDim> dims;
      int64_t rest = n;
      for (size_t d = 0; d < rank; ++d) {
        dims.push_back(candidates[d][(size_t)(rest % (int64_t)candidates[d].size())]);
        rest /= (int64_t)candidates[d].size();
      }
      Refs seen;
      bool valid = true;
      for (const SliceDim &d : dims)
        for (const AxisRef &r : d.axes) {
          valid = valid && std::none_of(seen.begin(), seen.end(), [&](const AxisRef &s) { return s.overlaps(r); });
          seen.push_back(r);
        }
      if (!valid) continue;
      const int64_t bytes = sliceCost(e, dims, to);
      if (bestBytes < 0 || bytes < bestBytes) bestBytes = bytes, best = std::move(dims);
    }
    const auto [want, result] = sliceShardings(best);
    Value *v = moved(x, want);
    // The cut dimensions computed unsharded: the slice itself, on them only.
    std::vector<int64_t> lo(rank, 0), hi = v->type.shape, strides(rank, 1);
    bool cut = false;
    for (size_t d = 0; d < rank; ++d)
      if (best[d].mode == SliceDim::Cut) {
        lo[d] = start[d], hi[d] = limit[d], strides[d] = e.intsParam("strides")[d];
        cut = cut || lo[d] != 0 || hi[d] != v->type.shape[d] || strides[d] != 1;
      }
    if (cut) {
      Type t = e.outs[0]->type;
      t.vary = 0;
      t.shape = v->type.shape;
      for (size_t d = 0; d < rank; ++d)
        if (best[d].mode == SliceDim::Cut) t.shape[d] = e.outs[0]->type.shape[d];
      v = emit(Prim::Slice, {v}, t, {{"start", lo}, {"limit", hi}, {"strides", strides}}, e.loc);
    }
    for (size_t d = 0; d < rank; ++d)
      if (best[d].mode == SliceDim::Thin) {
        const int64_t stride = e.intsParam("strides")[d];
        std::vector<int64_t> from(rank, 0), to = v->type.shape, by(rank, 1);
        from[d] = start[d] % stride, by[d] = stride;
        Type t = v->type;
        t.vary = 0;
        t.shape[d] /= stride;
        v = emit(Prim::Slice, {v}, t, {{"start", from}, {"limit", to}, {"strides", by}}, e.loc);
        t.shape[d] *= shardCount(best[d].axes);
        v = emit(Prim::AllGatherInvariant, {v}, t,
                 {{"axes", axesParam(best[d].axes)}, {"axis", (int64_t)d}, {"tiled", (int64_t)1}}, e.loc);
        v = sliceAlong(v, d, start[d] / stride, e.outs[0]->type.shape[d], e.loc);
      }
    std::vector<int64_t> sums;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t o = limit[d] - start[d];
      if (best[d].mode == SliceDim::Shift) {
        v = shifted(v, d, haloOf(x->type.shape[d], start[d], o, best[d].axes), start[d], best[d].axes, e.loc);
      } else if (best[d].mode == SliceDim::Mask) {
        v = masked(v, d, start[d], o, best[d].axes, e.loc);
        const std::vector<int64_t> more = axesParam(best[d].axes);
        sums.insert(sums.end(), more.begin(), more.end());
      }
    }
    if (!sums.empty()) {
      std::sort(sums.begin(), sums.end());  // (in mesh order, as a spec names them)
      v = emit(Prim::Psum, {v}, v->type, {{"axes", sums}}, e.loc);
    }
    held_[e.outs[0]] = {v, result, body_};
  }

  // The elements [from, from + size) of x along dimension d.
  Value *sliceAlong(Value *x, size_t d, int64_t from, int64_t size, Loc loc) {
    const size_t rank = x->type.shape.size();
    std::vector<int64_t> lo(rank, 0), hi = x->type.shape, strides(rank, 1);
    lo[d] = from, hi[d] = from + size;
    Type t = x->type;
    t.vary = 0;
    t.shape[d] = size;
    return emit(Prim::Slice, {x}, t, {{"start", lo}, {"limit", hi}, {"strides", strides}}, loc);
  }

  // x's block of `size` along dimension d starting at `first` + this device's index along
  // `axes` times `step` (clamped into x, as dynamic_slice is).
  Value *blockAt(Value *x, size_t d, int64_t first, int64_t step, int64_t size, const Refs &axes, Loc loc) {
    const Type i32{DType::I32, {}, 0};
    Value *index = emit(Prim::AxisIndex, {}, i32, {{"axes", axesParam(axes)}}, loc);
    Value *at = emit(Prim::Add, {emit(Prim::Mul, {index, constant((double)step, DType::I32, {})}, i32, {}, loc),
                                 constant((double)first, DType::I32, {})},
                     i32, {}, loc);
    std::vector<Value *> ins = {x};
    for (size_t k = 0; k < x->type.shape.size(); ++k) ins.push_back(k == d ? at : constant(0, DType::I32, {}));
    std::vector<int64_t> sizes = x->type.shape;
    sizes[d] = size;
    Type t = x->type;
    t.vary = 0;
    t.shape = sizes;
    return emit(Prim::DynamicSlice, ins, t, {{"sizes", sizes}}, loc);
  }

  // A Shift dimension: the halos from the neighbours along `axes` (ppermute), then each
  // device's result block from its own block between them.
  Value *shifted(Value *x, size_t d, const Halo &h, int64_t start, const Refs &axes, Loc loc) {
    const int64_t n = shardCount(axes);
    std::vector<Value *> parts;
    auto neighbour = [&](int64_t from, int64_t size, int64_t towards) {
      std::vector<int64_t> perm;
      for (int64_t k = 0; k < n; ++k)
        if (k + towards >= 0 && k + towards < n) perm.insert(perm.end(), {k, k + towards});
      Value *piece = sliceAlong(x, d, from, size, loc);
      return emit(Prim::Ppermute, {piece}, piece->type, {{"axes", axesParam(axes)}, {"perm", perm}}, loc);
    };
    if (h.left) parts.push_back(neighbour(h.inBlock - h.left, h.left, 1));  // (the block before's end)
    parts.push_back(x);
    if (h.right) parts.push_back(neighbour(0, h.right, -1));  // (the block after's start)
    if (parts.size() > 1) {
      Type t = x->type;
      t.vary = 0;
      t.shape[d] = h.left + h.inBlock + h.right;
      x = emit(Prim::Concatenate, parts, t, {{"dimension", (int64_t)d}}, loc);
    }
    if (h.outBlock == h.inBlock) return h.left + start == 0 ? x : sliceAlong(x, d, h.left + start, h.outBlock, loc);
    return blockAt(x, d, h.left + start, h.outBlock - h.inBlock, h.outBlock, axes, loc);
  }

  // A Mask dimension: this device's block (of size bi, at k * bi along `axes`) put where it
  // lies in the result [start, start + o), zeros elsewhere: the block between o zeros on each
  // side, cut at o + start - k * bi (clamped: a block the result does not reach gives zeros).
  Value *masked(Value *x, size_t d, int64_t start, int64_t o, const Refs &axes, Loc loc) {
    std::vector<int64_t> zeros = x->type.shape;
    zeros[d] = o;
    Value *z = constant(0, x->type.dtype, zeros);
    Type t = x->type;
    t.vary = 0;
    t.shape[d] = 2 * o + x->type.shape[d];
    Value *spread = emit(Prim::Concatenate, {z, x, z}, t, {{"dimension", (int64_t)d}}, loc);
    return blockAt(spread, d, o + start, -x->type.shape[d], o, axes, loc);
  }

  // What a padded element must be for the reduction `combine` finishes not to see it.
  static double identity(Prim combine, DType dtype) {
    if (combine == Prim::Psum) return 0;
    // (an i64's extremes as doubles that convert back: 2^63 itself does not)
    const double big = isFloat(dtype) ? std::numeric_limits<double>::infinity()
                       : dtype == DType::I32 ? 2147483647.0
                                             : 9223372036854774784.0;
    return combine == Prim::Pmax ? (isFloat(dtype) || dtype == DType::I64 ? -big : -big - 1) : big;
  }

  // A dimension made of several factors (a reshape's) is sharded by its factors' axes in
  // order only while each before is sharded wholly: a factor after one that is not keeps no
  // axes (the value is moved to its sharding after).
  static void keepWholeParts(const prims::FactorRule &rule, std::vector<Refs> &axes) {
    std::map<std::tuple<bool, int, int>, bool> before;  // (result?, value, dimension): parts so far whole
    for (size_t k = 0; k < rule.factors.size(); ++k) {
      const prims::Factor &f = rule.factors[k];
      if (!f.size) continue;
      for (const bool isOut : {false, true})
        for (const prims::DimRef &r : isOut ? f.outs : f.ins)
          if (!before.insert({{isOut, r.value, r.dim}, true}).first->second) axes[k].clear();
      for (const bool isOut : {false, true})
        for (const prims::DimRef &r : isOut ? f.outs : f.ins) {
          bool &whole = before[{isOut, r.value, r.dim}];
          whole = whole && shardCount(axes[k]) == f.size;
        }
    }
  }

  Module &m_;
  JitFunc &j_;
  Func &f_;
  SplitMesh split_;
  bool differentiated_;
  Func *body_ = nullptr;
  std::map<const Value *, Held> held_;
  std::map<const Value *, std::vector<Held>> copies_;  // each value's blocks in other shardings (blocks)
  std::map<const Value *, const Eqn *> repeats_;       // values that only repeat their operand's elements
  std::set<const Value *> droppable_;                  // what moves made, and blocks made again elsewhere
  std::set<const Value *> remade_;                     // repeating equations computed again on a moved operand
  std::vector<Func *> made_;                           // the bodies partitioning made
  // The operation being partitioned (a result's move: the return): where the collectives that
  // move its operands are in the program, which the watchdog's report names (their first use,
  // where a move is shared).
  Loc at_;
};

} // namespace

namespace {

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
  if (m.jitWhole) return;
  const std::set<const Func *> differentiated = differentiatedFuncs(m);
  for (JitFunc &j : m.jits)
    if (j.func && j.notPartitioned.empty() && !j.propagated.empty()) {
      Partitioner(m, j, differentiated.count(j.func) > 0).run();
      checkSpecs(j, diags);
    }
}

} // namespace shmapc::passes
