// A pipeline stage's shmaps on the pipeline's mesh run on the stage's slice of it: the mesh
// without its stage axis (the stage submesh), on the device group the stage belongs to, so
// stages compute at once on their own devices and a stage's collectives synchronise only its
// slice. Stage code may not name the stage axis: stages trade values through stage_boundary().
#include "passes/inline/Inline.h"
#include "passes/pipeline/Copy.h"
#include "passes/pipeline/Splitter.h"

namespace shmapc::passes::pipeline {

namespace {

// Mesh axis a of the pipeline's mesh on the submesh without axis `stage` (a != stage).
int64_t onSubmesh(int64_t a, int64_t stage) { return a > stage ? a - 1 : a; }

AxisSet setOnSubmesh(AxisSet s, int64_t stage) {
  AxisSet out = 0;
  for (int64_t a : axisList(s))
    if (a != stage) out |= AxisSet(1) << onSubmesh(a, stage);
  return out;
}

} // namespace

int64_t Splitter::stageSubmesh() {
  if (submesh_ >= 0) return submesh_;
  const Mesh &mesh = *m_.meshes[(size_t)p_.mesh];
  auto sub = std::make_unique<Mesh>();
  sub->name = mesh.name + "/" + mesh.axes[(size_t)p_.stageAxis];
  sub->loc = mesh.loc;
  sub->sliceOf = p_.mesh;
  for (size_t a = 0; a < mesh.axes.size(); ++a)
    if ((int64_t)a != p_.stageAxis) {
      sub->axes.push_back(mesh.axes[a]);
      sub->sizes.push_back(mesh.sizes[a]);
    }
  submesh_ = p_.submesh = (int64_t)m_.meshes.size();
  m_.meshes.push_back(std::move(sub));
  return submesh_;
}

void Splitter::remapToSubmesh(Func &f) {
  f.mesh = m_.meshes[(size_t)stageSubmesh()].get();
  const int64_t stage = p_.stageAxis;
  const std::string &axis = m_.meshes[(size_t)p_.mesh]->axes[(size_t)stage];
  for (Value *v : f.params) v->type.vary = setOnSubmesh(v->type.vary, stage);
  for (Eqn &e : f.eqns) {
    for (Value *v : e.outs) v->type.vary = setOnSubmesh(v->type.vary, stage);
    if (primInfo(e.prim).kind == PrimKind::Collective && e.has("axes")) {
      std::vector<int64_t> axes = e.intsParam("axes");
      for (int64_t &a : axes) {
        if (a == stage)
          fail(DiagId::PipelineStageAxis, e.loc,
               "'" + std::string(primName(e.prim)) + "' over the stage axis \"" + axis + "\" in a pipeline stage",
               "a stage runs on its own slice of the mesh: its collectives are over the other axes; values go from "
               "stage to stage across stage_boundary()");
        a = onSubmesh(a, stage);
      }
      e.params["axes"] = axes;
    }
    for (Func *b : e.bodies) remapToSubmesh(*b);
  }
}

int64_t Splitter::groupMesh(int group) {
  auto it = groupMeshes_.find(group);
  if (it != groupMeshes_.end()) return it->second;
  const int64_t declared = p_.groupMeshes[(size_t)group];
  auto copy = std::make_unique<Mesh>(*m_.meshes[(size_t)declared]);
  copy->name = p_.name + "/" + copy->name;
  copy->sliceOf = declared;
  const int64_t id = (int64_t)m_.meshes.size();
  m_.meshes.push_back(std::move(copy));
  return groupMeshes_[group] = id;
}

// A stage's shmaps (in loops and conditionals too) run on its device group's mesh, and only there.
void Splitter::stageShmapsOnGroupMesh(Eqn &e, int group) {
  if (e.prim != Prim::Shmap) {
    for (Func *b : e.bodies)
      for (Eqn &inner : b->eqns) stageShmapsOnGroupMesh(inner, group);
    return;
  }
  const int64_t declared = p_.groupMeshes[(size_t)group];
  if (e.intParam("mesh") != declared) {
    std::string stages;
    for (size_t k = 0; k < p_.placement.size(); ++k)
      if (p_.placement[k] == group) stages += (stages.empty() ? "" : ", ") + std::to_string(k);
    fail(DiagId::PipelineStageMesh, e.loc,
         "a shmap on mesh " + m_.meshes[(size_t)e.intParam("mesh")]->name + " in a pipeline stage placed on mesh " +
             m_.meshes[(size_t)declared]->name,
         "a stage runs on its device group's devices alone: run its shmaps on " + m_.meshes[(size_t)declared]->name +
             " (stage" + (stages.find(',') == std::string::npos ? " " : "s ") + stages + " of " + p_.name +
             "), or place the stage on the mesh its shmaps use");
  }
  const int64_t copy = groupMesh(group);
  e.params["mesh"] = copy;
  e.bodies[0] = copyFunc(m_, *e.bodies[0], m_.meshes[(size_t)copy].get());
}

void Splitter::stageShmapsOnSubmeshes(Func &mb) {
  if (!p_.groupMeshes.empty()) {
    for (size_t i = 0; i < mb.eqns.size(); ++i) stageShmapsOnGroupMesh(mb.eqns[i], p_.placement[(size_t)mbStage_[i]]);
    return;
  }
  const int64_t stage = p_.stageAxis;
  const Mesh &mesh = *m_.meshes[(size_t)p_.mesh];
  for (Eqn &e : mb.eqns) {
    if (e.prim != Prim::Shmap || e.intParam("mesh") != p_.mesh) continue;
    if (mesh.axes.size() == 1)
      fail(DiagId::PipelineStageAxis, e.loc,
           "a shmap in a pipeline stage on the pipeline's mesh " + mesh.name + ", whose only axis is the stage axis",
           "declare " + mesh.name + " with axes besides \"" + mesh.axes[(size_t)stage] +
               "\": a stage's shmaps run on its slice, over those axes");
    for (const char *which : {"in_specs", "out_specs"}) {
      std::vector<PartitionSpec> specs = e.specsParam(which);
      for (PartitionSpec &s : specs)
        for (std::vector<int> &dim : s.dims)
          for (int &a : dim) {
            if (a == stage)
              fail(DiagId::PipelineStageAxis, e.loc,
                   std::string("the ") + which + " of a shmap in a pipeline stage split a value over the stage axis \"" +
                       mesh.axes[(size_t)stage] + "\"",
                   "a stage runs on its own slice of the mesh: split its values over the other axes");
            a = (int)onSubmesh(a, stage);
          }
      e.params[which] = specs;
    }
    const int64_t sub = stageSubmesh();
    e.params["mesh"] = sub;
    e.bodies[0] = copyFunc(m_, *e.bodies[0], m_.meshes[(size_t)sub].get());
    remapToSubmesh(*e.bodies[0]);
  }
}

} // namespace shmapc::passes::pipeline
