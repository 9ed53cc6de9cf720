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
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <tuple>

namespace shmapc::passes {

namespace {

using namespace ir;

// A dimension's sharding: mesh axes or sub-axes, major to minor, adjacent sub-axes merged.
using Refs = std::vector<AxisRef>;

// The mesh the shmap runs on: the jit function's, with each axis split at the sub-axes the
// function's shardings use ("x"=4 used as "x":(1)2 and "x":(2)2 becomes the axes "x:(1)2"=2
// and "x:(2)2"=2; devices keep their numbers, as the minor sub-axis is the minor axis), so
// every sharding is one of its partition specs and every collective names its axes.
class SplitMesh {
public:
  SplitMesh(Module &m, const JitFunc &j) : mesh_(*m.meshes[(size_t)j.mesh]), index_(j.mesh) {
    std::vector<std::set<int64_t>> cuts(mesh_.axes.size());
    for (size_t a = 0; a < mesh_.axes.size(); ++a) cuts[a] = {1, mesh_.sizes[a]};
    for (const auto &[v, s] : j.propagated)
      for (const DimSharding &d : s.dims)
        for (const AxisRef &a : d.axes) cuts[(size_t)a.axis].insert({a.preSize, a.preSize * a.size});
    bool split = false;
    for (const std::set<int64_t> &c : cuts) split = split || c.size() > 2;
    auto derived = std::make_unique<Mesh>();
    derived->name = mesh_.name + ".split";
    derived->loc = mesh_.loc;
    pieces_.resize(mesh_.axes.size());
    for (size_t a = 0; a < mesh_.axes.size(); ++a)
      for (auto it = cuts[a].begin(); std::next(it) != cuts[a].end(); ++it) {
        const AxisRef piece{(int)a, *it, *std::next(it) / *it};
        pieces_[a].push_back({piece, (int)derived->axes.size()});
        derived->axes.push_back(cuts[a].size() > 2 ? mesh_.axes[a] + ":(" + std::to_string(piece.preSize) + ")" +
                                                         std::to_string(piece.size)
                                                   : mesh_.axes[a]);
        derived->sizes.push_back(piece.size);
      }
    if (split) index_ = addMesh(m, std::move(derived));
    derived_ = m.meshes[(size_t)index_].get();
  }

  int index() const { return index_; }
  Mesh &mesh() const { return *derived_; }

  // The split mesh's axes that make up `refs`, major to minor.
  std::vector<int> axes(const Refs &refs) const {
    std::vector<int> out;
    for (const AxisRef &r : refs)
      for (const auto &[piece, index] : pieces_[(size_t)r.axis])
        if (piece.preSize >= r.preSize && piece.preSize * piece.size <= r.preSize * r.size) out.push_back(index);
    return out;
  }

private:
  // The index of a mesh like `mesh` in m (another jit function's split), or of `mesh` added
  // (renamed if a different split of the same mesh has its name).
  static int addMesh(Module &m, std::unique_ptr<Mesh> mesh) {
    const std::string base = mesh->name;
    for (int n = 2;; ++n) {
      auto same = std::find_if(m.meshes.begin(), m.meshes.end(), [&](const auto &o) { return o->name == mesh->name; });
      if (same == m.meshes.end()) break;
      if ((*same)->axes == mesh->axes && (*same)->sizes == mesh->sizes) return (int)(same - m.meshes.begin());
      mesh->name = base + std::to_string(n);
    }
    m.meshes.push_back(std::move(mesh));
    return (int)m.meshes.size() - 1;
  }

  const Mesh &mesh_;
  int index_;
  Mesh *derived_ = nullptr;
  std::vector<std::vector<std::pair<AxisRef, int>>> pieces_;  // per axis: its pieces, split-mesh index
};

class Partitioner {
public:
  Partitioner(Module &m, JitFunc &j) : m_(m), j_(j), f_(*j.func), split_(m, j) {}

  void run() {
    body_ = m_.newFunc(f_.name + "_partitioned");
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
      held_[p] = {local, s};
      inSpecs.push_back(specOf(s));
      Value *in = p;
      for (size_t d = 0; d < s.size(); ++d) in = pad(in, d, paddedType(p->type, s).shape[d], &f_);
      ins.push_back(in);
    }
    for (const Eqn &e : eqns) partition(e);
    for (Value *r : f_.results) {
      std::vector<Refs> s = target(r);
      body_->results.push_back(moved(r, s));
      outSpecs.push_back(specOf(s));
    }
    body_->returnLoc = f_.returnLoc.valid() ? f_.returnLoc : f_.loc;
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

  // A dimension of size n split over c devices unevenly is padded at its end to the next
  // multiple of c (seed 001: "the dimension needs padding"); each device holds n / c rounded
  // up, and the last devices' blocks end in padding (or are all padding). Partitioning keeps
  // the padding out of every result: the host pads the parameters and slices the results,
  // a gathered dimension is sliced to its size, a reduction over a padded dimension (a sum, a
  // maximum, a contraction) first sets the padding to its identity (maskPadding), and a
  // reshape that splits or merges a padded dimension takes it unsharded.
  static int64_t blockSize(int64_t n, const Refs &axes) {
    const int64_t c = shardCount(axes);
    return (n + c - 1) / c;
  }
  static bool even(int64_t n, const Refs &axes) { return n % shardCount(axes) == 0; }

  static Type localType(const Type &global, const std::vector<Refs> &s) {
    Type t = global;
    t.vary = 0;
    for (size_t d = 0; d < s.size(); ++d) t.shape[d] = blockSize(t.shape[d], s[d]);
    return t;
  }

  // The global type the shmap sees: each unevenly sharded dimension padded.
  static Type paddedType(const Type &global, const std::vector<Refs> &s) {
    Type t = localType(global, s);
    for (size_t d = 0; d < s.size(); ++d) t.shape[d] *= shardCount(s[d]);
    return t;
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

  // v's local value in sharding `to`: the dimensions sharded otherwise gathered, then sliced.
  Value *moved(const Value *v, const std::vector<Refs> &to) {
    Held h = held_.at(v);
    if (h.dims == to) return h.local;
    Value *x = h.local;
    std::vector<Refs> now = h.dims;
    // Axes that move from one dimension to another (from an unsharded one to one that is to
    // be unsharded): all_to_all, which sends each device only the parts others keep.
    for (size_t from = 0; from < now.size(); ++from)
      for (size_t d = 0; d < now.size(); ++d) {
        if (d == from || now[from].empty() || now[from] != to[d] || !now[d].empty() || !to[from].empty()) continue;
        x = pad(x, d, blockSize(v->type.shape[d], now[from]) * shardCount(now[from]));
        Type t = x->type;
        t.vary = 0;
        t.shape[from] *= shardCount(now[from]);
        t.shape[d] /= shardCount(now[from]);
        x = emit(Prim::AllToAll, {x}, t,
                 {{"axes", axesParam(now[from])}, {"split_axis", (int64_t)d}, {"concat_axis", (int64_t)from}, {"tiled", (int64_t)1}},
                 f_.loc);
        x = unpad(x, from, v->type.shape[from]);
        now[d] = now[from];
        now[from].clear();
      }
    // A dimension sharded along the first of the axes it is to be (evenly) only needs them
    // all: each device slices its block further.
    for (size_t d = 0; d < now.size(); ++d) {
      if (now[d] == to[d] || now[d].empty() || refines(v->type.shape[d], now[d], to[d])) continue;
      Type t = x->type;
      t.vary = 0;
      t.shape[d] *= shardCount(now[d]);
      x = emit(Prim::AllGatherInvariant, {x}, t, {{"axes", axesParam(now[d])}, {"axis", (int64_t)d}, {"tiled", (int64_t)1}},
               f_.loc);
      x = unpad(x, d, v->type.shape[d]);
      now[d].clear();
    }
    for (size_t d = 0; d < now.size(); ++d) {
      if (now[d] == to[d]) continue;
      const std::vector<int> all = split_.axes(to[d]);
      const std::vector<int64_t> rest(all.begin() + (ptrdiff_t)split_.axes(now[d]).size(), all.end());
      x = pad(x, d, blockSize(v->type.shape[d], to[d]) * (shardCount(to[d]) / shardCount(now[d])));
      Type t = x->type;
      t.vary = 0;
      t.shape[d] = blockSize(v->type.shape[d], to[d]);
      x = emit(Prim::Pscatter, {x}, t, {{"axes", rest}, {"axis", (int64_t)d}, {"tiled", (int64_t)1}}, f_.loc);
      now[d] = to[d];
    }
    return x;
  }

  void partition(const Eqn &e) {
    const prims::FactorRule rule = prims::rulesOf(e.prim).sharding(e);
    Eqn local = e;
    local.outs.clear();
    if (rule.kind == prims::FactorRule::Free) {
      const std::vector<Refs> s = target(e.outs[0]);
      Value *v = body_->newValue(localType(e.outs[0]->type, s), e.outs[0]->hint);
      local.outs = {v};
      body_->eqns.push_back(std::move(local));
      held_[e.outs[0]] = {v, s};
      return;
    }
    if (rule.kind == prims::FactorRule::Replicated) {
      for (size_t i = 0; i < e.ins.size(); ++i) local.ins[i] = moved(e.ins[i], std::vector<Refs>((size_t)e.ins[i]->type.rank()));
      for (const Value *o : e.outs) {
        Type t = o->type;
        t.vary = 0;
        Value *v = body_->newValue(t, o->hint);
        local.outs.push_back(v);
        held_[o] = {v, std::vector<Refs>((size_t)o->type.rank())};
      }
      body_->eqns.push_back(std::move(local));
      return;
    }
    if (rule.kind == prims::FactorRule::Nested) return partitionNested(e, rule, std::move(local));
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
      to->loc = from.loc;
      to->mesh = &split_.mesh();
      to->isNested = true;
      to->returnLoc = from.returnLoc;
      for (const Value *p : from.params) {
        const std::vector<Refs> s = shardingOf(p);
        Value *v = to->newValue(localType(p->type, s), p->hint);
        to->params.push_back(v);
        held_[p] = {v, s};
      }
      body_ = to;
      for (const Eqn &inner : from.eqns) partition(inner);
      for (const Value *r : from.results) to->results.push_back(moved(r, shardingOf(r)));
      body_ = outer;
      local.bodies[b] = to;
    }
    for (const Value *o : e.outs) {
      const std::vector<Refs> s = shardingOf(o);
      Value *v = body_->newValue(localType(o->type, s), o->hint);
      local.outs.push_back(v);
      held_[o] = {v, s};
    }
    body_->eqns.push_back(std::move(local));
  }

  // The axes of the part of `dims`' dimension r is (its whole dimension, or a reshape's part).
  static Refs partOf(const std::vector<Refs> &dims, const prims::DimRef &r, const prims::Factor &f) {
    return f.size ? projectAxes(dims[(size_t)r.dim], r.pre, f.size) : dims[(size_t)r.dim];
  }

  // Each factor takes its result dimension's axes, or (reduced) its first operand's where no
  // other factor uses them; the operands are moved to those.
  void partitionFactors(const Eqn &e, const prims::FactorRule &rule, Eqn local) {
    std::vector<std::vector<Refs>> outs;
    for (const Value *o : e.outs) outs.push_back(target(o));
    // A sum over a factor sharded along the same axes as a result dimension (the reduce-
    // scatter matmul, Tmp[B_X, F_Y] *F W[F_Y, D] -> Out[B_X, D_Y]): each device computes that
    // dimension whole from its shards, and psum_scatter sums and splits it at once.
    int scatterDim = -1;
    Refs scatterAxes;
    for (const prims::Factor &f : rule.factors) {
      if (!f.outs.empty() || f.ins.empty() || f.combine != Prim::Psum || e.outs.size() != 1) continue;
      const Refs k = partOf(held_.at(e.ins[(size_t)f.ins[0].value]).dims, f.ins[0], f);
      for (size_t d = 0; d < outs[0].size() && !k.empty() && scatterDim < 0; ++d)
        if (outs[0][d] == k && even(e.outs[0]->type.shape[d], k)) scatterDim = (int)d, scatterAxes = k;
    }
    std::vector<std::vector<Refs>> computed = outs;  // the local computation's result shardings
    if (scatterDim >= 0) computed[0][(size_t)scatterDim].clear();
    std::vector<Refs> axes(rule.factors.size());
    chooseFactorAxes(e, rule, computed, scatterDim, axes);
    Refs used;  // (the axes of the factors with result dimensions: a reduced one may not take them)
    for (size_t k = 0; k < rule.factors.size(); ++k)
      if (!rule.factors[k].outs.empty()) used.insert(used.end(), axes[k].begin(), axes[k].end());
    auto isUsed = [&](const AxisRef &a) {
      return std::any_of(used.begin(), used.end(), [&](const AxisRef &u) { return u.overlaps(a); });
    };
    for (size_t k = 0; k < rule.factors.size(); ++k) {
      const prims::Factor &f = rule.factors[k];
      if (f.outs.empty() && !f.ins.empty()) {
        const Refs first = partOf(held_.at(e.ins[(size_t)f.ins[0].value]).dims, f.ins[0], f);
        if (std::none_of(first.begin(), first.end(), isUsed)) axes[k] = first;
        used.insert(used.end(), axes[k].begin(), axes[k].end());
      }
    }
    for (size_t k = 0; k < rule.factors.size(); ++k)  // (a reshape's part is never padded)
      if (rule.factors[k].size && rule.factors[k].size % shardCount(axes[k]) != 0) axes[k].clear();
    keepWholeParts(rule, axes);
    // The operands' and the local results' shardings: each dimension its factors' axes.
    std::vector<std::vector<Refs>> want(e.ins.size());
    for (size_t i = 0; i < e.ins.size(); ++i) want[i].resize((size_t)e.ins[i]->type.rank());
    std::vector<std::vector<Refs>> result(e.outs.size());
    for (size_t o = 0; o < e.outs.size(); ++o) result[o].resize((size_t)e.outs[o]->type.rank());
    for (size_t k = 0; k < rule.factors.size(); ++k) {
      for (const prims::DimRef &r : rule.factors[k].ins) {
        Refs &d = want[(size_t)r.value][(size_t)r.dim];
        d.insert(d.end(), axes[k].begin(), axes[k].end());
      }
      for (const prims::DimRef &r : rule.factors[k].outs) {
        Refs &d = result[(size_t)r.value][(size_t)r.dim];
        d.insert(d.end(), axes[k].begin(), axes[k].end());
      }
    }
    for (std::vector<Refs> &dims : want)
      for (Refs &d : dims) d = mergeSubAxes(d);
    for (std::vector<Refs> &dims : result)
      for (Refs &d : dims) d = mergeSubAxes(d);
    for (size_t i = 0; i < e.ins.size(); ++i) local.ins[i] = moved(e.ins[i], want[i]);
    for (size_t k = 0; k < rule.factors.size(); ++k) {  // (a reduction over padding)
      const prims::Factor &f = rule.factors[k];
      if (!f.outs.empty() || axes[k].empty()) continue;
      for (const prims::DimRef &r : f.ins) {
        const Value *in = e.ins[(size_t)r.value];
        if (!even(in->type.shape[(size_t)r.dim], axes[k]))
          local.ins[(size_t)r.value] = maskPadding(local.ins[(size_t)r.value], (size_t)r.dim, axes[k],
                                                   in->type.shape[(size_t)r.dim], identity(f.combine, in->type.dtype));
      }
    }
    for (size_t o = 0; o < e.outs.size(); ++o) {
      Value *v = body_->newValue(localType(e.outs[o]->type, result[o]), e.outs[o]->hint);
      local.outs.push_back(v);
    }
    const std::vector<Value *> outsLocal = local.outs;
    Value *out = outsLocal[0];
    body_->eqns.push_back(std::move(local));
    // The reduced factors finished by one collective each kind, over all their axes (a sum
    // over two sharded dimensions is one psum over both, not a psum per dimension).
    std::vector<std::pair<Prim, std::vector<int64_t>>> finish;
    for (size_t k = 0; k < rule.factors.size(); ++k) {
      const prims::Factor &f = rule.factors[k];
      if (!f.outs.empty() || axes[k].empty() || axes[k] == scatterAxes) continue;
      auto same = std::find_if(finish.begin(), finish.end(), [&](const auto &c) { return c.first == f.combine; });
      if (same == finish.end()) same = finish.insert(finish.end(), {f.combine, {}});
      const std::vector<int64_t> more = axesParam(axes[k]);
      same->second.insert(same->second.end(), more.begin(), more.end());
    }
    for (auto &[combine, list] : finish) {
      std::sort(list.begin(), list.end());  // (in mesh order, as a spec names them)
      out = emit(combine, {out}, out->type, {{"axes", list}}, e.loc);
    }
    for (size_t k = 0; k < rule.factors.size(); ++k) {
      const prims::Factor &f = rule.factors[k];
      if (!f.outs.empty() || axes[k].empty() || axes[k] != scatterAxes) continue;
      Type t = out->type;
      t.shape[(size_t)scatterDim] /= shardCount(axes[k]);
      out = emit(Prim::PsumScatter, {out}, t,
                 {{"axes", axesParam(axes[k])}, {"scatter_dimension", (int64_t)scatterDim}, {"tiled", (int64_t)1}}, e.loc);
      result[0][(size_t)scatterDim] = axes[k];
    }
    held_[e.outs[0]] = {out, result[0]};
    for (size_t o = 1; o < e.outs.size(); ++o) held_[e.outs[o]] = {outsLocal[o], result[o]};
  }

  // The bytes a device puts into collectives to move dimension d of v, held in `dims`, to
  // `to` (the other dimensions kept): none when it is sharded as `to` already, unsharded
  // (each device slices its block) or along the first of `to`'s axes; else its block (a
  // gather).
  int64_t moveBytes(const Value *v, const std::vector<Refs> &dims, size_t d, const Refs &to) const {
    if (dims[d] == to || dims[d].empty() || refines(v->type.shape[d], dims[d], to)) return 0;
    int64_t bytes = v->type.byteSize();
    for (const Refs &r : dims) bytes /= shardCount(r);
    return bytes;
  }

  bool refines(int64_t n, const Refs &from, const Refs &to) const {
    const std::vector<int> a = split_.axes(from), b = split_.axes(to);
    return even(n, to) && a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
  }

  // Each factor with result dimensions is computed in its result's sharding, or in an
  // operand's where that moves fewer bytes (the operands moved there, plus the result moved to
  // its own after): of a * b held {"z", "y"} and {"z"} whose result is to be unsharded, the
  // product is computed split and gathered once, not after gathering both. An operand's
  // sharding competes only if no other factor has or is to have its axes; a reshape's parts
  // and a result dimension psum_scatter splits keep the result's.
  void chooseFactorAxes(const Eqn &e, const prims::FactorRule &rule, const std::vector<std::vector<Refs>> &computed,
                        int scatterDim, std::vector<Refs> &axes) const {
    Refs taken;  // the axes of the factors chosen so far and the result's of those to come
    for (const prims::Factor &f : rule.factors)
      for (const prims::DimRef &r : f.outs) {
        const Refs a = partOf(computed[(size_t)r.value], r, f);
        taken.insert(taken.end(), a.begin(), a.end());
      }
    for (size_t k = 0; k < rule.factors.size(); ++k) {
      const prims::Factor &f = rule.factors[k];
      if (f.outs.empty()) continue;
      const Refs own = partOf(computed[(size_t)f.outs[0].value], f.outs[0], f);
      axes[k] = own;
      const bool scatters = f.outs[0].value == 0 && f.outs[0].dim == scatterDim;
      if (f.size || scatters) continue;
      auto cost = [&](const Refs &c) {
        int64_t bytes = 0;
        for (const prims::DimRef &r : f.ins) {
          const Value *in = e.ins[(size_t)r.value];
          bytes += moveBytes(in, held_.at(in).dims, (size_t)r.dim, c);
        }
        for (const prims::DimRef &r : f.outs) {
          std::vector<Refs> at = computed[(size_t)r.value];
          at[(size_t)r.dim] = c;
          bytes += moveBytes(e.outs[(size_t)r.value], at, (size_t)r.dim, computed[(size_t)r.value][(size_t)r.dim]);
        }
        return bytes;
      };
      int64_t best = cost(own);
      for (const prims::DimRef &r : f.ins) {
        const Refs c = held_.at(e.ins[(size_t)r.value]).dims[(size_t)r.dim];
        const bool clash = std::any_of(c.begin(), c.end(), [&](const AxisRef &a) {
          return std::any_of(taken.begin(), taken.end(), [&](const AxisRef &t) { return t.overlaps(a); }) &&
                 std::none_of(own.begin(), own.end(), [&](const AxisRef &o) { return o.overlaps(a); });
        });
        const int64_t bytes = clash ? best : cost(c);
        if (bytes < best) best = bytes, axes[k] = c;
      }
      taken.insert(taken.end(), axes[k].begin(), axes[k].end());
    }
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
  Func *body_ = nullptr;
  std::map<const Value *, Held> held_;
};

} // namespace

void partitionJit(Module &m, Diagnostics &) {
  if (m.jitWhole) return;
  for (JitFunc &j : m.jits)
    if (j.func && j.notPartitioned.empty() && !j.propagated.empty()) Partitioner(m, j).run();
}

} // namespace shmapc::passes
