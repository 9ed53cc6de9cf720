// --emit=comm's pipeline messages (Comm.h): each pipeline's messages between its device
// groups, by the layouts their two ends hold them in, as the code generator keeps them
// (forms/HostForms.h: a stage shmap's result sent as the shmap leaves it, what only the
// receiving stage's shmaps read, in one layout, received as their blocks, anything else
// whole). Where the layouts differ the message is resharded on its way; under MPI each
// receiving rank gets only what its devices read.
#include "comm/Comm.h"
#include "forms/HostForms.h"

#include <map>
#include <sstream>
#include <tuple>

namespace shmapc::comm {

using namespace ir;

namespace {

// A message end's layout: its blocks form's spec, or whole.
std::string layoutOf(const Module &m, const forms::HostForms &forms, const Value *v) {
  const forms::ShmapLayout *layout = forms.blocksLayout(v);
  if (!layout || layout->mesh < 0 || layout->mesh >= (int64_t)m.meshes.size()) return "whole";
  return specToString(layout->spec, *m.meshes[(size_t)layout->mesh]);
}

} // namespace

std::vector<CommPipeline> pipelineMessages(const Module &m) {
  std::vector<CommPipeline> out;
  const forms::HostForms forms = forms::findHostForms(m);
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
                         layoutOf(m, forms, v), layoutOf(m, forms, to->second.second)};
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
