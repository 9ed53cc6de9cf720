// --emit=comm's pipeline messages (Comm.h): each pipeline's messages between its device
// groups, by the layouts their two ends hold them in. The sending stage sends a stage shmap's
// result as the shmap leaves it (split over the group's devices), anything else whole; the
// receiving stage keeps what only its shmaps read, in one layout, as their blocks, anything
// else whole (the code generator's blocks form). Where the layouts differ the message is
// resharded on its way; under MPI each receiving rank gets only what its devices read.
#include "comm/Comm.h"

#include <map>
#include <sstream>
#include <tuple>

namespace shmapc::comm {

using namespace ir;

namespace {

std::string layoutOf(const Module &m, int64_t meshIndex, const PartitionSpec &spec) {
  if (meshIndex < 0 || meshIndex >= (int64_t)m.meshes.size()) return "whole";
  const Mesh &mesh = *m.meshes[(size_t)meshIndex];
  return mesh.groupSize(spec.axes()) > 1 ? specToString(spec, mesh) : "whole";  // (split over devices)
}

// How stage program `f` holds what it sends: a shmap's result as that shmap's out_specs say,
// where it is read only by sends and by shmaps in that layout.
std::string sentAs(const Module &m, const Func &f, const Value *v) {
  std::string layout = "whole";
  for (const Eqn &e : f.eqns)
    for (size_t j = 0; j < e.outs.size(); ++j)
      if (e.outs[j] == v && e.prim == Prim::Shmap)
        layout = layoutOf(m, e.intParam("mesh"), e.specsParam("out_specs")[j]);
  if (layout == "whole") return layout;
  for (const Eqn &e : f.eqns)
    for (size_t k = 0; k < e.ins.size(); ++k)
      if (e.ins[k] == v && e.prim != Prim::PipeSend &&
          (e.prim != Prim::Shmap || layoutOf(m, e.intParam("mesh"), e.specsParam("in_specs")[k]) != layout))
        return "whole";
  for (const Value *r : f.results)
    if (r == v) return "whole";
  return layout;
}

// How stage program `f` keeps what it receives: as its readers' one layout if only shmaps read it.
std::string readAs(const Module &m, const Func &f, const Value *v) {
  std::string layout;
  for (const Eqn &e : f.eqns)
    for (size_t k = 0; k < e.ins.size(); ++k) {
      if (e.ins[k] != v) continue;
      if (e.prim != Prim::Shmap) return "whole";
      const std::string here = layoutOf(m, e.intParam("mesh"), e.specsParam("in_specs")[k]);
      if (!layout.empty() && here != layout) return "whole";
      layout = here;
    }
  for (const Value *r : f.results)
    if (r == v) return "whole";
  return layout.empty() ? "whole" : layout;
}

} // namespace

std::vector<CommPipeline> pipelineMessages(const Module &m) {
  std::vector<CommPipeline> out;
  for (const auto &f : m.funcs)
    for (const Eqn &e : f->eqns) {
      if (e.prim != Prim::Pipeline) continue;
      CommPipeline p;
      p.label = e.strParam("label");
      std::map<int64_t, std::pair<size_t, const Value *>> sent, received;  // channel -> (group, value)
      for (size_t g = 0; g < e.bodies.size(); ++g)
        for (const Eqn &x : e.bodies[g]->eqns) {
          if (x.prim == Prim::PipeSend) sent[x.intParam("channel")] = {g, x.ins[0]};
          if (x.prim == Prim::PipeRecv) received[x.intParam("channel")] = {g, x.outs[0]};
        }
      std::map<std::tuple<size_t, size_t, std::string, std::string, std::string>, size_t> rowOf;
      for (const auto &[c, from] : sent) {
        auto to = received.find(c);
        if (to == received.end()) continue;
        const Value *v = from.second;
        CommMessages row{from.first, to->second.first, typeToString(v->type, nullptr), 0, 0,
                         sentAs(m, *e.bodies[from.first], v), readAs(m, *e.bodies[to->second.first], to->second.second)};
        auto [it, fresh] = rowOf.try_emplace({row.fromGroup, row.toGroup, row.type, row.sentAs, row.readAs},
                                             p.rows.size());
        if (fresh) p.rows.push_back(row);
        CommMessages &r = p.rows[it->second];
        ++r.count;
        r.bytes += v->type.byteSize();
        p.count += 1;
        p.bytes += v->type.byteSize();
      }
      out.push_back(std::move(p));
    }
  return out;
}

std::string printPipelineMessages(const std::vector<CommPipeline> &pipelines) {
  std::ostringstream out;
  for (const CommPipeline &p : pipelines) {
    out << "pipeline " << p.label << ": " << p.count << " message" << (p.count == 1 ? "" : "s") << " a run, "
        << p.bytes << " B (point_to_point)\n";
    bool resharded = false;
    for (const CommMessages &r : p.rows) {
      out << "  group " << r.fromGroup << " -> group " << r.toGroup << ": " << r.count << " of " << r.type << ", "
          << r.bytes << " B; sent " << (r.sentAs == "whole" ? "whole" : "as " + r.sentAs) << ", received "
          << (r.readAs == "whole" ? "whole" : "as " + r.readAs);
      if (r.sentAs != r.readAs) {
        out << " (reshard)";
        resharded = true;
      }
      out << "\n";
    }
    if (!p.rows.empty())
      out << "  (under MPI each rank of the receiving group gets only the part its devices hold"
          << (resharded ? ", resharded on the way" : "") << ")\n";
  }
  return out.str();
}

} // namespace shmapc::comm
