// Element-wise host arithmetic on split arrays, run on the devices that hold the blocks.
//
// A shmap's output whose out_spec splits it lives, block by block, on the devices (under MPI a
// rank's copy holds its devices' blocks until someone reads it whole: forms/HostForms.cpp).
// Host code that updates such arrays element by element (an optimizer step over sharded
// parameters, gradients and moments) would read them whole; the same arithmetic applied block
// by block gives the same elements. So each run of element-wise equations whose array
// operands share one layout (one mesh and spec; whole host arrays and scalars may join, split
// or passed as they are) becomes a shmap with that layout: each device computes its block, and
// the result is split as its operands were. A run ends before the first other equation that
// reads one of its values, so every value is still computed before it is read. Arrays made of
// scalars alone (a broadcast learning rate, a splat constant) are computed where they are
// read: inside each shmap that reads them (per block), and on the host only if the host
// reads them. So is element-wise arithmetic on whole arrays that only such runs read (an
// optimizer's `b1 * mu` over moments a pipeline stage keeps whole): its whole operands are
// split at the shmap's boundary, and the update placed on the devices reads the parameters
// and moments themselves, last, so that it may write over them.
#include "passes/placement/Placement.h"
#include "passes/variance/Variance.h"
#include "rules/Rules.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

namespace shmapc::passes {

namespace {

using namespace ir;

// A split array's place: the mesh and spec of the shmap that left it (trailing unsplit
// dimensions dropped, so P("x") and P("x", None) agree).
struct Layout {
  int mesh = -1;
  PartitionSpec spec;
  bool operator==(const Layout &o) const { return mesh == o.mesh && spec == o.spec; }
  bool operator<(const Layout &o) const { return mesh != o.mesh ? mesh < o.mesh : spec.dims < o.spec.dims; }
};

// Whether `s` splits some dimension over more than one device (on a mesh of one device, or
// along axes of size 1, every block is the whole array: nothing to keep on the devices).
bool splitsAnything(const PartitionSpec &s, const Mesh &mesh) {
  for (const auto &d : s.dims)
    for (int a : d)
      if (mesh.sizes[(size_t)a] > 1) return true;
  return false;
}

Layout layoutOf(int mesh, PartitionSpec spec) {
  while (!spec.dims.empty() && spec.dims.back().empty()) spec.dims.pop_back();
  return Layout{mesh, spec};
}

// An equation computed element by element with one result, which a block of the devices can
// compute from the blocks of its operands (a scalar operand stands for every element).
bool isElementwise(const Eqn &e) {
  if (!e.bodies.empty() || e.outs.size() != 1 || e.outs[0]->type.rank() == 0) return false;
  if (rules::rulesOf(e.prim).sharding != &rules::elementwiseFactors && e.prim != Prim::BroadcastInDim &&
      e.prim != Prim::Constant)
    return false;
  if (e.prim == Prim::Constant && e.doublesParam("value").size() != 1) return false;  // (splats only)
  for (const Value *v : e.ins) {
    if (e.prim == Prim::BroadcastInDim && v->type.rank() != 0) return false;  // (of scalars only)
    if (v->type.rank() != 0 && v->type.shape != e.outs[0]->type.shape) return false;
  }
  return true;
}

Type blockType(Type t, const PartitionSpec &spec, const Mesh &mesh) {
  for (size_t d = 0; d < spec.dims.size() && d < t.shape.size(); ++d)
    for (int a : spec.dims[d]) t.shape[d] /= mesh.sizes[(size_t)a];
  t.vary = 0;
  return t;
}

class Placer {
public:
  Placer(Module &m, Diagnostics &diags) : m_(m), diags_(diags) {}

  void run() {
    std::vector<Func *> funcs;
    for (const auto &f : m_.funcs) funcs.push_back(f.get());  // (the pass adds bodies)
    for (Func *f : funcs)
      if (!f->mesh && !f->isShmapBody) place(*f);
  }

private:
  struct Region {
    Layout layout;
    std::vector<size_t> members;        // indices into the function's equations, in order
    std::set<const Value *> made;       // their results
  };

  // The layout of a host function's result: a split shmap output, returned (memoized; the
  // function is placed first, so its own placed arithmetic counts).
  const Layout *resultLayout(Func &f, size_t k) {
    place(f);
    auto it = resultLayouts_.find(&f);
    if (it == resultLayouts_.end() || k >= it->second.size() || it->second[k].mesh < 0) return nullptr;
    return &it->second[k];
  }

  // The layouts a loop's carries keep from step to step: a carry is split as the body leaves
  // it when the body, given its carries so split, leaves it so again (a fixpoint from "none
  // split"; the first value, whole on the host, holds every block). Indexed by carry; worked
  // out once per loop (its body's own loops are asked again in every round), and the same
  // before and after the body is placed (placing keeps every value's layout).
  const std::vector<std::optional<Layout>> &carryLayouts(const Eqn &loop) {
    Func &body = *loop.bodies.back();
    auto known = carryLayouts_.find(&body);
    if (known != carryLayouts_.end()) return known->second;
    std::vector<std::optional<Layout>> carries = fixpointCarryLayouts(loop);
    return carryLayouts_.emplace(&body, std::move(carries)).first->second;
  }

  std::vector<std::optional<Layout>> fixpointCarryLayouts(const Eqn &loop) {
    const size_t consts = (size_t)loop.intParam("num_consts");
    const size_t first = (loop.prim == Prim::Loop ? 1 : 0) + consts;  // the body's first carry param
    Func &body = *loop.bodies.back();
    std::vector<std::optional<Layout>> carries(loop.outs.size());
    for (int round = 0; round < 8; ++round) {
      std::unordered_map<const Value *, Layout> seeds;
      for (size_t c = 0; c < carries.size(); ++c)
        if (carries[c]) seeds[body.params.at(first + c)] = *carries[c];
      std::vector<std::optional<Layout>> next = dryRun(body, seeds);
      next.resize(carries.size());
      if (next == carries) return carries;
      carries = next;
    }
    return std::vector<std::optional<Layout>>(loop.outs.size());  // (no fixpoint: nothing kept split)
  }

  // The layouts placing `f` would give its results, with `seeds` for its params (f unchanged);
  // `joins`, if given, marks the equations that would run on the devices.
  std::vector<std::optional<Layout>> dryRun(Func &f, std::unordered_map<const Value *, Layout> layout,
                                            std::vector<bool> *joins = nullptr) {
    std::set<const Value *> free;
    if (joins) joins->assign(f.eqns.size(), false);
    for (size_t i = 0; i < f.eqns.size(); ++i) {
      const Eqn &e = f.eqns[i];
      if (isFree(e, free)) {
        free.insert(e.outs[0]);
      } else if (std::optional<Layout> l = candidateLayout(e, layout)) {
        layout[e.outs[0]] = *l;
        if (joins) (*joins)[i] = true;
      } else if (e.prim == Prim::Loop || e.prim == Prim::While) {
        const std::vector<std::optional<Layout>> &carries = carryLayouts(e);
        for (size_t k = 0; k < e.outs.size(); ++k)
          if (carries[k]) layout[e.outs[k]] = *carries[k];
      } else {
        noteLayouts(e, layout);
      }
    }
    std::vector<std::optional<Layout>> out;
    for (const Value *r : f.results) {
      auto it = layout.find(r);
      out.push_back(it == layout.end() ? std::nullopt : std::optional<Layout>(it->second));
    }
    return out;
  }

  void place(Func &f, const std::unordered_map<const Value *, Layout> &seeds = {}) {
    if (!placed_.insert(&f).second || f.mesh || f.isShmapBody) return;
    for (const Eqn &e : f.eqns) {  // (callees and loop bodies first: their results' layouts are read below)
      if (e.prim == Prim::Call) place(*e.bodies[0]);
      if (e.prim != Prim::Loop && e.prim != Prim::While) continue;
      const std::vector<std::optional<Layout>> carries = carryLayouts(e);
      const size_t first = (e.prim == Prim::Loop ? 1 : 0) + (size_t)e.intParam("num_consts");
      for (Func *b : e.bodies) {
        std::unordered_map<const Value *, Layout> carried;
        for (size_t c = 0; c < carries.size(); ++c)
          if (carries[c] && first + c < b->params.size()) carried[b->params[first + c]] = *carries[c];
        place(*b, carried);
      }
    }
    std::unordered_map<const Value *, Layout> layout = seeds;
    std::unordered_map<const Value *, std::vector<size_t>> readers;  // equation indices
    std::set<const Value *> results(f.results.begin(), f.results.end());
    for (size_t i = 0; i < f.eqns.size(); ++i)
      for (const Value *v : f.eqns[i].ins) readers[v].push_back(i);

    // Element-wise equations of no split operand that only equations run on the devices read
    // (latest first: their readers are decided before them), computed where read.
    std::vector<bool> onDevices, pulledIn(f.eqns.size(), false);
    dryRun(f, seeds, &onDevices);
    for (size_t i = f.eqns.size(); i-- > 0;) {
      const Eqn &e = f.eqns[i];
      if (onDevices[i] || !isElementwise(e) || results.count(e.outs[0])) continue;
      auto rd = readers.find(e.outs[0]);
      pulledIn[i] = rd != readers.end() && std::all_of(rd->second.begin(), rd->second.end(),
                                                       [&](size_t j) { return onDevices[j] || pulledIn[j]; });
    }

    std::vector<Eqn> eqns = std::move(f.eqns);
    f.eqns.clear();
    free_.clear();
    std::map<Layout, Region> open;
    // A free array's equation goes to the host the first time the host reads it.
    std::function<void(const Value *)> materialize = [&](const Value *v) {
      auto it = free_.find(v);
      if (it == free_.end() || it->second.emitted) return;
      it->second.emitted = true;
      for (const Value *in : eqns[it->second.index].ins) materialize(in);
      f.eqns.push_back(eqns[it->second.index]);
    };
    auto flush = [&](Region &r) {
      if (std::optional<Eqn> s = makeShmap(f, eqns, r, readers, results)) f.eqns.push_back(std::move(*s));
    };

    for (size_t i = 0; i < eqns.size(); ++i) {
      Eqn &e = eqns[i];
      if (isFree(e, free_) || pulledIn[i]) {
        free_[e.outs[0]] = {i, false};
        continue;
      }
      if (std::optional<Layout> l = candidateLayout(e, layout)) {
        Region &r = open[*l];
        r.layout = *l;
        r.members.push_back(i);
        r.made.insert(e.outs[0]);
        layout[e.outs[0]] = *l;
        continue;
      }
      for (auto it = open.begin(); it != open.end();) {
        bool reads = std::any_of(e.ins.begin(), e.ins.end(), [&](const Value *v) { return it->second.made.count(v); });
        if (reads) {
          flush(it->second);
          it = open.erase(it);
        } else {
          ++it;
        }
      }
      for (const Value *v : e.ins) materialize(v);
      noteLayouts(e, layout);
      f.eqns.push_back(std::move(e));
    }
    for (auto &[l, r] : open) flush(r);
    for (const Value *v : f.results) materialize(v);
    gatherAfterLoops(f, layout);

    std::vector<Layout> &out = resultLayouts_[&f];
    for (const Value *r : f.results) {
      auto it = layout.find(r);
      out.push_back(it == layout.end() ? Layout{} : it->second);
    }
  }

  // An array computed from scalars alone, element by element: a broadcast scalar, a splat
  // constant, or arithmetic on such arrays.
  template <class Set> static bool isFree(const Eqn &e, const Set &free) {
    if (!isElementwise(e)) return false;
    for (const Value *v : e.ins)
      if (v->type.rank() != 0 && !free.count(v)) return false;
    return true;
  }

  // The layouts the results of a shmap or call leave.
  void noteLayouts(const Eqn &e, std::unordered_map<const Value *, Layout> &layout) {
    if (e.prim == Prim::Shmap) {
      const auto &specs = e.specsParam("out_specs");
      for (size_t k = 0; k < e.outs.size(); ++k)
        if (splitsAnything(specs[k], *m_.meshes[(size_t)e.intParam("mesh")]))
          layout[e.outs[k]] = layoutOf((int)e.intParam("mesh"), specs[k]);
    } else if (e.prim == Prim::Call || e.prim == Prim::Loop || e.prim == Prim::While) {
      // (a loop's carry is split as its body leaves it; if the body never runs it is the
      // carry's first value, whole, which holds every block too)
      for (size_t k = 0; k < e.outs.size(); ++k)
        if (const Layout *l = resultLayout(*e.bodies.back(), k)) layout[e.outs[k]] = *l;
    }
  }

  // A loop carry the devices keep split from step to step is gathered once after the loop for
  // what reads it whole (host code, or shmaps in another layout): an identity shmap in its
  // layout whose result the host reads, so the carry itself is only ever read split.
  void gatherAfterLoops(Func &f, const std::unordered_map<const Value *, Layout> &layout) {
    std::vector<Eqn> eqns = std::move(f.eqns);
    f.eqns.clear();
    std::unordered_map<const Value *, Layout> carried;  // split loop results not yet gathered
    std::unordered_map<const Value *, Value *> gathered;
    auto whole = [&](Value *v) -> Value * {
      auto c = carried.find(v);
      if (c == carried.end()) return v;
      auto g = gathered.find(v);
      if (g != gathered.end()) return g->second;
      const Layout &l = c->second;
      Type block = blockType(v->type, l.spec, *m_.meshes[(size_t)l.mesh]);
      block.vary = l.spec.axes();
      f.eqns.push_back(identityShmap(m_, f, f.name + "_gathered", l.mesh, l.spec, v, block,
                                     f.eqns.empty() ? f.loc : f.eqns.back().loc, "to_host"));
      return gathered[v] = f.eqns.back().outs[0];
    };
    for (Eqn &e : eqns) {
      for (size_t k = 0; k < e.ins.size(); ++k) {
        auto c = carried.find(e.ins[k]);
        if (c == carried.end()) continue;
        const bool split = e.prim == Prim::Shmap &&
                           layoutOf((int)e.intParam("mesh"), e.specsParam("in_specs")[k]) == c->second;
        // (a checkpoint saves the blocks as they are: save_checkpoint)
        const bool checkpoint = e.prim == Prim::SaveNpz && e.has("checkpoint");
        if (!split && !checkpoint) e.ins[k] = whole(e.ins[k]);
      }
      const bool loop = e.prim == Prim::Loop || e.prim == Prim::While;
      f.eqns.push_back(std::move(e));
      if (loop)
        for (const Value *out : f.eqns.back().outs)
          if (auto l = layout.find(out); l != layout.end()) carried[out] = l->second;
    }
    for (Value *&r : f.results) r = whole(r);
  }

  // The layout `e` can run in on the devices: the one layout of its split array operands.
  std::optional<Layout> candidateLayout(const Eqn &e, const std::unordered_map<const Value *, Layout> &layout) {
    if (!isElementwise(e)) return std::nullopt;
    std::optional<Layout> found;
    for (const Value *v : e.ins) {
      auto it = layout.find(v);
      if (it == layout.end()) continue;  // a whole host array or a scalar: split at the boundary
      if (found && !(*found == it->second)) return std::nullopt;
      found = it->second;
    }
    if (!found) return std::nullopt;
    // Every block must have whole elements: each split dimension divides evenly (it does for
    // a shmap's output; a whole operand of another shape never joins).
    const Mesh &mesh = *m_.meshes[(size_t)found->mesh];
    const Type &t = e.outs[0]->type;
    for (size_t d = 0; d < found->spec.dims.size(); ++d) {
      int64_t n = 1;
      for (int a : found->spec.dims[d]) n *= mesh.sizes[(size_t)a];
      if (d >= t.shape.size() || t.shape[d] % n != 0) return std::nullopt;
    }
    return found;
  }

  // The shmap that computes region `r` of `eqns` (a function of `f`) block by block (none if
  // nothing reads its results).
  std::optional<Eqn> makeShmap(Func &f, std::vector<Eqn> &eqns, const Region &r,
                const std::unordered_map<const Value *, std::vector<size_t>> &readers,
                const std::set<const Value *> &results) {
    const Mesh &mesh = *m_.meshes[(size_t)r.layout.mesh];
    Func *body = m_.newFunc(f.name + "_on_devices");
    body->mesh = &mesh;
    body->isShmapBody = true;
    body->loc = eqns[r.members.front()].loc;
    body->returnLoc = eqns[r.members.back()].loc;

    std::vector<Value *> ins;
    std::vector<PartitionSpec> inSpecs;
    std::vector<AxisSet> paramVary;
    std::unordered_map<const Value *, Value *> local;
    std::function<Value *(Value *)> input = [&](Value *v) -> Value * {
      auto it = local.find(v);
      if (it != local.end()) return it->second;
      if (auto fr = free_.find(v); fr != free_.end()) {  // computed here, block by block
        const Eqn &e = eqns[fr->second.index];
        std::vector<Value *> args;
        for (Value *in : e.ins) args.push_back(input(in));
        const Type block = blockType(e.outs[0]->type, r.layout.spec, mesh);
        rules::MakeEqn how;
        how.declared = &block;
        how.hint = e.outs[0]->hint;
        body->eqns.push_back(rules::makeEqn(*body, e.prim, args, e.params, e.loc, how));
        return local[v] = body->eqns.back().outs[0];
      }
      PartitionSpec spec = v->type.rank() == 0 ? PartitionSpec{} : r.layout.spec;
      Value *p = body->newValue(blockType(v->type, spec, mesh), v->hint);
      body->params.push_back(p);
      ins.push_back(v);
      inSpecs.push_back(spec);
      paramVary.push_back(spec.axes());
      return local[v] = p;
    };
    std::set<size_t> members(r.members.begin(), r.members.end());
    std::vector<Value *> outs;
    for (size_t i : r.members) {
      const Eqn &e = eqns[i];
      std::vector<Value *> args;
      for (Value *v : e.ins) args.push_back(r.made.count(v) ? local.at(v) : input(v));
      const Type block = blockType(e.outs[0]->type, r.layout.spec, mesh);
      rules::MakeEqn how;
      how.declared = &block;
      how.hint = e.outs[0]->hint;
      body->eqns.push_back(rules::makeEqn(*body, e.prim, args, e.params, e.loc, how));
      local[e.outs[0]] = body->eqns.back().outs[0];
      // A result read outside the region (or returned) leaves the shmap, split as it is.
      bool outside = results.count(e.outs[0]) != 0;
      auto rd = readers.find(e.outs[0]);
      if (rd != readers.end())
        for (size_t j : rd->second) outside |= !members.count(j);
      if (outside) {
        outs.push_back(e.outs[0]);
        body->results.push_back(local[e.outs[0]]);
        body->outSpecLocs.push_back(e.loc);
      }
    }
    if (outs.empty()) return std::nullopt;
    if (!retypeWithParams(*body, paramVary, diags_.sources()))
      throw InternalError("place-on-devices: element-wise arithmetic on blocks could not be typed");

    Eqn shmap;
    shmap.prim = Prim::Shmap;
    shmap.loc = body->loc;
    shmap.ins = ins;
    shmap.outs = outs;
    shmap.bodies = {body};
    shmap.params["mesh"] = (int64_t)r.layout.mesh;
    shmap.params["in_specs"] = inSpecs;
    shmap.params["out_specs"] = std::vector<PartitionSpec>(outs.size(), r.layout.spec);
    return shmap;
  }

  Module &m_;
  Diagnostics &diags_;
  struct Free {
    size_t index;  // its equation, in the function being placed
    bool emitted;  // on the host too
  };
  std::unordered_map<const Value *, Free> free_;  // the function being placed's free arrays
  std::set<const Func *> placed_;
  std::unordered_map<const Func *, std::vector<std::optional<Layout>>> carryLayouts_;  // by loop body
  std::unordered_map<const Func *, std::vector<Layout>> resultLayouts_;
};

} // namespace

void placeOnDevices(Module &m, Diagnostics &diags) { Placer(m, diags).run(); }

} // namespace shmapc::passes
