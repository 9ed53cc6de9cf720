// The layout of partitioned jit functions' values (PartitionLayout.h).
#include "passes/jit/PartitionLayout.h"

#include <algorithm>
#include <set>
#include <string>

namespace shmapc::passes::layout {

using namespace ir;

namespace {

// The index of a mesh like `mesh` in m (another jit function's split), or of `mesh` added
// (renamed if a different split of the same mesh has its name).
int addMesh(Module &m, std::unique_ptr<Mesh> mesh) {
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

} // namespace

SplitMesh::SplitMesh(Module &m, const JitFunc &j) : index_(j.mesh) {
  const Mesh &mesh = *m.meshes[(size_t)j.mesh];
  std::vector<std::set<int64_t>> cuts(mesh.axes.size());
  for (size_t a = 0; a < mesh.axes.size(); ++a) cuts[a] = {1, mesh.sizes[a]};
  for (const auto &[v, s] : j.propagated)
    for (const DimSharding &d : s.dims)
      for (const AxisRef &a : d.axes) cuts[(size_t)a.axis].insert({a.preSize, a.preSize * a.size});
  bool split = false;
  for (const std::set<int64_t> &c : cuts) split = split || c.size() > 2;
  auto derived = std::make_unique<Mesh>();
  derived->name = mesh.name + ".split";
  derived->loc = mesh.loc;
  pieces_.resize(mesh.axes.size());
  for (size_t a = 0; a < mesh.axes.size(); ++a) {
    if (cuts[a].size() == 1) {  // (an axis of size 1: one piece, the axis)
      pieces_[a].push_back({AxisRef{(int)a, 1, 1}, (int)derived->axes.size()});
      derived->axes.push_back(mesh.axes[a]);
      derived->sizes.push_back(1);
      continue;
    }
    for (auto it = cuts[a].begin(); std::next(it) != cuts[a].end(); ++it) {
      const AxisRef piece{(int)a, *it, *std::next(it) / *it};
      pieces_[a].push_back({piece, (int)derived->axes.size()});
      derived->axes.push_back(cuts[a].size() > 2 ? mesh.axes[a] + ":(" + std::to_string(piece.preSize) + ")" +
                                                       std::to_string(piece.size)
                                                 : mesh.axes[a]);
      derived->sizes.push_back(piece.size);
    }
  }
  if (split) index_ = addMesh(m, std::move(derived));
  derived_ = m.meshes[(size_t)index_].get();
}

std::vector<int> SplitMesh::axes(const Refs &refs) const {
  std::vector<int> out;
  for (const AxisRef &r : refs)
    for (const auto &[piece, index] : pieces_[(size_t)r.axis])
      if (piece.preSize >= r.preSize && piece.preSize * piece.size <= r.preSize * r.size) out.push_back(index);
  return out;
}

int64_t blockSize(int64_t n, const Refs &axes) {
  const int64_t c = shardCount(axes);
  return (n + c - 1) / c;
}

bool even(int64_t n, const Refs &axes) { return n % shardCount(axes) == 0; }

Type localType(const Type &global, const std::vector<Refs> &s) {
  Type t = global;
  t.vary = 0;
  for (size_t d = 0; d < s.size(); ++d) t.shape[d] = blockSize(t.shape[d], s[d]);
  return t;
}

Type paddedType(const Type &global, const std::vector<Refs> &s) {
  Type t = localType(global, s);
  for (size_t d = 0; d < s.size(); ++d) t.shape[d] *= shardCount(s[d]);
  return t;
}

int64_t localBytes(const Value *v, const std::vector<Refs> &dims) {
  int64_t bytes = dtypeSize(v->type.dtype);
  for (size_t d = 0; d < dims.size(); ++d) bytes *= blockSize(v->type.shape[d], dims[d]);
  return bytes;
}

bool refines(const SplitMesh &mesh, int64_t n, const Refs &from, const Refs &to) {
  const std::vector<int> a = mesh.axes(from), b = mesh.axes(to);
  return even(n, to) && a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
}

std::vector<MoveStep> planMove(const SplitMesh &mesh, const Value *v, std::vector<Refs> now,
                               const std::vector<Refs> &to) {
  std::vector<MoveStep> steps;
  for (size_t from = 0; from < now.size(); ++from)
    for (size_t d = 0; d < now.size(); ++d) {
      if (d == from || now[from].empty() || now[from] != to[d] || !now[d].empty() || !to[from].empty()) continue;
      steps.push_back({Prim::AllToAll, d, from, now[from], {}});
      now[d] = now[from];
      now[from].clear();
    }
  for (size_t d = 0; d < now.size(); ++d) {
    if (now[d] == to[d] || now[d].empty() || refines(mesh, v->type.shape[d], now[d], to[d])) continue;
    steps.push_back({Prim::AllGatherInvariant, d, 0, now[d], {}});
    now[d].clear();
  }
  for (size_t d = 0; d < now.size(); ++d)
    if (now[d] != to[d]) steps.push_back({Prim::Pscatter, d, 0, to[d], now[d]});
  return steps;
}

int64_t moveBytes(const SplitMesh &mesh, const Value *v, std::vector<Refs> now, const std::vector<Refs> &to) {
  int64_t bytes = 0;
  for (const MoveStep &s : planMove(mesh, v, now, to)) {
    if (s.prim == Prim::Pscatter) continue;
    bytes += localBytes(v, now);
    if (s.prim == Prim::AllToAll) now[s.dim] = s.axes;
    now[s.prim == Prim::AllToAll ? s.from : s.dim].clear();
  }
  return bytes;
}

bool repeatsOperand(const Eqn &e) {
  if (e.prim == Prim::Constant) return e.outs.size() == 1 && e.doublesParam("value").size() == 1;
  if (e.ins.size() != 1 || e.outs.size() != 1) return false;
  if (e.prim == Prim::BroadcastInDim) return true;
  // (a convert that narrows puts fewer bytes in its result than its operand holds)
  return e.prim == Prim::Convert && dtypeSize(e.outs[0]->type.dtype) > dtypeSize(e.ins[0]->type.dtype);
}

std::vector<Refs> operandSharding(const Eqn &e, const std::vector<Refs> &to) {
  if (e.prim != Prim::BroadcastInDim) return to;
  const Type &in = e.ins[0]->type, &out = e.outs[0]->type;
  const std::vector<int64_t> &dims = e.intsParam("broadcast_dimensions");
  std::vector<Refs> s((size_t)in.rank());
  for (size_t i = 0; i < s.size(); ++i)
    if (in.shape[i] == out.shape[(size_t)dims[i]]) s[i] = to[(size_t)dims[i]];
  return s;
}

} // namespace shmapc::passes::layout
