// Shardy's sharding representation (IR.h): shard counts, local shapes, and its notation.
#include "ir/IR.h"

#include <algorithm>
#include <functional>

namespace shmapc::ir {

int64_t shardCount(const std::vector<AxisRef> &axes) {
  int64_t n = 1;
  for (const AxisRef &a : axes) n *= a.size;
  return n;
}

int64_t shardCount(const DimSharding &d) { return shardCount(d.axes); }

std::vector<AxisRef> projectAxes(const std::vector<AxisRef> &axes, int64_t pre, int64_t size) {
  std::vector<AxisRef> out;
  int64_t before = 1;  // the product of the axes before this one
  for (const AxisRef &a : axes) {
    const int64_t lo = std::max(before, pre), hi = std::min(before * a.size, pre * size);
    if (lo < hi) {
      if (lo % before != 0 || hi % lo != 0 || (before * a.size) % hi != 0) break;  // (not at a split)
      out.push_back(AxisRef{a.axis, a.preSize * (lo / before), hi / lo});
    }
    before *= a.size;
    if (before >= pre * size) break;
  }
  return out;
}

std::vector<AxisRef> mergeSubAxes(const std::vector<AxisRef> &axes) {
  std::vector<AxisRef> out;
  for (const AxisRef &a : axes) {
    if (!out.empty() && out.back().axis == a.axis && out.back().preSize * out.back().size == a.preSize)
      out.back().size *= a.size;
    else
      out.push_back(a);
  }
  return out;
}

std::vector<int64_t> localShape(const Sharding &s, const std::vector<int64_t> &global) {
  std::vector<int64_t> local = global;
  for (size_t d = 0; d < s.dims.size() && d < local.size(); ++d) {
    const int64_t n = shardCount(s.dims[d]);
    local[d] = (local[d] + n - 1) / n;
  }
  return local;
}

// [mesh, dims, per dimension (open, priority, axes, per axis (axis, preSize, size)),
//  replicated, per axis (axis, preSize, size)]
std::vector<int64_t> encodeSharding(const Sharding &s) {
  std::vector<int64_t> v = {s.mesh, (int64_t)s.dims.size()};
  auto refs = [&](const std::vector<AxisRef> &axes) {
    v.push_back((int64_t)axes.size());
    for (const AxisRef &a : axes) v.insert(v.end(), {a.axis, a.preSize, a.size});
  };
  for (const DimSharding &d : s.dims) {
    v.push_back(d.open);
    v.push_back(d.priority);
    refs(d.axes);
  }
  refs(s.replicated);
  return v;
}

Sharding decodeSharding(const std::vector<int64_t> &v) {
  Sharding s;
  size_t at = 0;
  auto next = [&]() { return at < v.size() ? v[at++] : 0; };
  auto refs = [&]() {
    std::vector<AxisRef> axes((size_t)std::max<int64_t>(0, next()));
    for (AxisRef &a : axes) {
      a.axis = (int)next();
      a.preSize = next();
      a.size = next();
    }
    return axes;
  };
  s.mesh = (int)next();
  s.dims.resize((size_t)std::max<int64_t>(0, next()));
  for (DimSharding &d : s.dims) {
    d.open = next() != 0;
    d.priority = next();
    d.axes = refs();
  }
  s.replicated = refs();
  return s;
}

std::string axisRefToString(const AxisRef &a, const Mesh &mesh) {
  std::string s = "\"" + mesh.axes[(size_t)a.axis] + "\"";
  if (!a.isFull(mesh)) s += ":(" + std::to_string(a.preSize) + ")" + std::to_string(a.size);
  return s;
}

std::string shardingToString(const Sharding &s, const Mesh &mesh) {
  std::string out = "sharding<@" + mesh.name + ", [";
  for (size_t d = 0; d < s.dims.size(); ++d) {
    const DimSharding &dim = s.dims[d];
    out += d ? ", {" : "{";
    for (size_t i = 0; i < dim.axes.size(); ++i) out += (i ? ", " : "") + axisRefToString(dim.axes[i], mesh);
    if (dim.open) out += dim.axes.empty() ? "?" : ", ?";
    out += "}";
    if (dim.priority >= 0) out += "p" + std::to_string(dim.priority);
  }
  out += "]";
  if (!s.replicated.empty()) {
    out += ", replicated={";
    for (size_t i = 0; i < s.replicated.size(); ++i) out += (i ? ", " : "") + axisRefToString(s.replicated[i], mesh);
    out += "}";
  }
  return out + ">";
}

namespace {

std::string shapeText(const Type &t, const std::vector<int64_t> &shape) {
  std::string s = dtypeName(t.dtype) + std::string("[");
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? "," : "") + std::to_string(shape[d]);
  return s + "]";
}

// `name: f32[4,8] sharding<...> local f32[2,1]`, or for a value no sharding reaches
// "(no sharding)".
std::string valueLine(const std::string &name, const Type &t, const Sharding *sh, const Module &m) {
  std::string s = "  " + name + ": " + shapeText(t, t.shape);
  if (!sh) return s + " (no sharding)\n";
  std::vector<int64_t> local = localShape(*sh, t.shape);
  s += " " + shardingToString(*sh, *m.meshes[(size_t)sh->mesh]) + " local " + shapeText(t, local);
  bool padded = false;
  for (size_t d = 0; d < sh->dims.size() && d < t.shape.size(); ++d)
    padded = padded || t.shape[d] % shardCount(sh->dims[d]) != 0;
  if (padded) s += " (padded)";
  return s + "\n";
}

std::string valueName(const Value *v) { return v->hint.empty() ? "%" + std::to_string(v->id) : v->hint; }

} // namespace

// Each jit function: after propagation every parameter, equation result and result with its
// sharding; a function inlined away (or before propagation) with the shardings written.
std::string printShardings(const Module &m) {
  std::string out;
  for (const JitFunc &j : m.jits) {
    out += "jit @" + j.name + " mesh " + m.meshes[(size_t)j.mesh]->name + "\n";
    auto written = [](const std::vector<Sharding> &list, size_t i) { return i < list.size() ? &list[i] : nullptr; };
    auto propagated = [&](const Value *v) {
      auto it = j.propagated.find(v);
      return it == j.propagated.end() ? nullptr : &it->second;
    };
    const bool after = j.func && !j.propagated.empty();
    for (size_t i = 0; i < j.paramTypes.size(); ++i)
      out += valueLine(j.paramNames[i], j.paramTypes[i],
                       after ? propagated(j.func->params[i]) : written(j.inShardings, i), m);
    // (a loop's or conditional's bodies, indented, before its results)
    std::function<void(const Func &, const std::string &)> eqns = [&](const Func &f, const std::string &indent) {
      for (const Eqn &e : f.eqns) {
        for (size_t b = 0; b < e.bodies.size(); ++b) {
          const Func &body = *e.bodies[b];
          if (body.params.empty() || !propagated(body.params[0])) continue;
          const std::string in = indent + "  ", what = primName(e.prim) + std::string(" body ") + std::to_string(b);
          for (const Value *p : body.params) out += valueLine(in + what + " param " + valueName(p), p->type, propagated(p), m);
          eqns(body, in);
          for (size_t r = 0; r < body.results.size(); ++r)
            out += valueLine(in + what + " result " + std::to_string(r), body.results[r]->type,
                             propagated(body.results[r]), m);
        }
        for (const Value *v : e.outs) out += valueLine(indent + valueName(v) + " = " + primName(e.prim), v->type, propagated(v), m);
      }
    };
    if (after) eqns(*j.func, "");
    for (size_t i = 0; i < j.resultTypes.size(); ++i)
      out += valueLine("result " + std::to_string(i), j.resultTypes[i],
                       after ? propagated(j.func->results[i]) : written(j.outShardings, i), m);
    if (!j.notPartitioned.empty())
      out += "  not partitioned (" + j.notPartitioned + " is not supported yet): runs whole on the host\n";
  }
  return out;
}

} // namespace shmapc::ir
