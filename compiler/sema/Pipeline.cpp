// @pipeline functions: sema checks the attributes against the mesh and the parameters and
// records the instance (ir::Module::pipelines); the split-micro-batches pass does the rest.
#include "sema/SemaImpl.h"

#include <algorithm>

namespace shmapc::sema {

void Sema::recordPipeline(const ast::FuncDecl &decl, ir::Func &f, const std::vector<ArgDesc> &args) {
  const ast::PipelineAttrs &a = *decl.pipeline;
  ir::PipelineFunc p;
  p.name = f.name;
  p.loc = decl.loc;
  p.func = &f;
  const bool onMeshes = !a.placementMeshes.empty() && !a.placementMeshes[0].empty();
  if (onMeshes) {
    recordGroupMeshes(a, p);
  } else {
    p.mesh = meshIndex(a.mesh, a.meshLoc);
    const ir::Mesh &mesh = *module_->meshes[(size_t)p.mesh];
    p.stageAxis = axisIndex(mesh, a.axis, a.axisLoc);
    p.stageAxisSize = mesh.sizes[(size_t)p.stageAxis];
  }
  p.microbatches = a.microbatches;
  p.microbatchesLoc = a.microbatchesLoc.valid() ? a.microbatchesLoc : a.loc;
  p.scheduleLoc = a.scheduleLoc.valid() ? a.scheduleLoc : a.loc;
  if (!ir::scheduleFromName(a.schedule, p.schedule))
    fail(DiagId::BadPipelineAttr, a.scheduleLoc, "unknown schedule \"" + a.schedule + "\"",
         "the schedules are \"gpipe\", \"1f1b\", \"interleaved\", \"zb-h1\" and \"inference\"");
  p.virtualStages = a.virtualStages;
  p.remat = a.remat;
  if (a.virtualStages != 1 && p.schedule != ir::Schedule::Interleaved)
    fail(DiagId::BadPipelineAttr, a.virtualStagesLoc,
         "virtual_stages=" + std::to_string(a.virtualStages) + " needs schedule=\"interleaved\"",
         "remove virtual_stages, or interleave the stages with schedule=\"interleaved\"");
  recordPlacement(a, p);
  std::vector<size_t> starts;
  size_t next = 0;
  for (const ArgDesc &d : args) {
    starts.push_back(next);
    next += leafCount(d);
  }
  for (size_t b = 0; b < a.batch.size(); ++b) {
    size_t i = 0;
    while (i < decl.params.size() && decl.params[i].name != a.batch[b]) ++i;
    if (i == decl.params.size())
      fail(DiagId::BadPipelineAttr, a.batchLocs[b], a.batch[b] + " is not a parameter of " + decl.name,
           "batch= names the parameters that hold the batch (split into micro-batches along dimension 0)");
    if (args[i].isAxes)
      fail(DiagId::BadPipelineAttr, a.batchLocs[b], "batch parameter " + a.batch[b] + " is given axis names",
           "pass arrays: the batch is split along dimension 0");
    for (size_t k = starts[i]; k < starts[i] + leafCount(args[i]); ++k) {
      const ir::Value *leaf = f.params[k];
      if (leaf->type.rank() == 0 || leaf->type.shape[0] % a.microbatches != 0)
        fail(DiagId::PipelineBatch, a.batchLocs[b],
             "batch parameter " + a.batch[b] + (leaf->hint.empty() || leaf->hint == a.batch[b] ? "" : " (" + leaf->hint + ")") +
                 " is " + str(leaf->type) + ", whose dimension 0 does not split into " +
                 std::to_string(a.microbatches) + " micro-batches",
             leaf->type.rank() == 0 ? "a batch argument needs a batch dimension (dimension 0)"
                                    : "choose microbatches= dividing the batch size " + std::to_string(leaf->type.shape[0]));
      p.batchLeaves.push_back((int)k);
      p.batchLocs.push_back(a.batchLocs[b]);
    }
  }
  module_->pipelines.push_back(std::move(p));
}

// placement=(a, b, b): each stage on a declared mesh, a device group per mesh (in the order they
// first appear), of any sizes; the groups' devices one after another. Instead of mesh= and axis=.
void Sema::recordGroupMeshes(const ast::PipelineAttrs &a, ir::PipelineFunc &p) {
  if (a.meshLoc.valid() || a.axisLoc.valid())
    fail(DiagId::BadPipelineAttr, a.meshLoc.valid() ? a.meshLoc : a.axisLoc,
         "placement= names the meshes the stages run on, so the pipeline takes no " +
             std::string(a.meshLoc.valid() ? "mesh=" : "axis="),
         "remove mesh= and axis=; or place the stages on slices of one mesh's stage axis: placement=(0, 1)");
  for (size_t k = 0; k < a.placementMeshes.size(); ++k) {
    if (a.placementMeshes[k].empty())
      fail(DiagId::BadPipelineAttr, a.placementLocs[k], "a device group's number among meshes in placement=",
           "name a mesh for every stage, placement=(a, b, b), or a slice of the stage axis for every one");
    const int mesh = meshIndex(a.placementMeshes[k], a.placementLocs[k]);
    auto it = std::find(p.groupMeshes.begin(), p.groupMeshes.end(), mesh);
    if (it == p.groupMeshes.end()) it = p.groupMeshes.insert(p.groupMeshes.end(), mesh);
    p.placement.push_back((int)(it - p.groupMeshes.begin()));
  }
  p.stageAxisSize = (int64_t)p.groupMeshes.size();
}

// placement= and order=: checked here against the stage axis; the stages' count against the
// markers and the orders' steps by the split-micro-batches pass, which builds the schedule.
void Sema::recordPlacement(const ast::PipelineAttrs &a, ir::PipelineFunc &p) {
  const int64_t G = p.stageAxisSize;
  if (a.placementLoc.valid()) {
    if (a.virtualStages != 1)
      fail(DiagId::BadPipelineAttr, a.virtualStagesLoc, "virtual_stages= and placement= both say where the stages run",
           "remove virtual_stages: placement=(0, 1, 0, 1) places stages as virtual_stages=2 does on 2 device groups");
    if (p.schedule == ir::Schedule::Interleaved)
      fail(DiagId::BadPipelineAttr, a.scheduleLoc.valid() ? a.scheduleLoc : a.placementLoc,
           "schedule=\"interleaved\" places its virtual stages round-robin, so it takes no placement=",
           "choose \"gpipe\", \"1f1b\" or \"zb-h1\": each device group runs its stages' steps in the order the "
           "schedule gives the stages; or give virtual_stages= instead of placement=");
    if (a.placement.empty())
      fail(DiagId::BadPipelineAttr, a.placementLoc, "placement=() places no stage",
           "give each stage's device group, a slice of the stage axis: placement=(0, 1)");
    for (size_t k = 0; k < a.placement.size() && p.groupMeshes.empty(); ++k) {
      if (!a.placementMeshes[k].empty())
        fail(DiagId::BadPipelineAttr, a.placementLocs[k], "a mesh among device groups' numbers in placement=",
             "number a slice of the stage axis for every stage, placement=(0, 1), or name a mesh for every one");
      if (a.placement[k] < 0 || a.placement[k] >= G)
        fail(DiagId::BadPipelineAttr, a.placementLocs[k],
             "stage " + std::to_string(k) + " placed on device group " + std::to_string(a.placement[k]) +
                 ", but the stage axis has " + std::to_string(G) + " slices",
             "device groups are numbered 0 to " + std::to_string(G - 1) + " along the stage axis");
      p.placement.push_back((int)a.placement[k]);
    }
    for (int64_t g = 0; g < G; ++g)
      if (std::find(p.placement.begin(), p.placement.end(), (int)g) == p.placement.end())
        fail(DiagId::BadPipelineAttr, a.placementLoc, "device group " + std::to_string(g) + " holds no stage",
             "place a stage on every slice of the stage axis (or declare the axis smaller)");
    p.placementLoc = a.placementLoc;
  }
  if (a.orderLoc.valid()) {
    if ((int64_t)a.order.size() != G)
      fail(DiagId::BadPipelineAttr, a.orderLoc,
           "order= gives " + std::to_string(a.order.size()) + " device groups' steps, but the stage axis has " +
               std::to_string(G) + " slices",
           "give one string per device group, its steps in the order it runs them");
    p.order = a.order;
    p.orderLocs = a.orderLocs;
    p.orderLoc = a.orderLoc;
  }
}

// stage_boundary(): the end of one pipeline stage and the start of the next, in the function a
// pipeline function differentiates (Alpa's mark_pipeline_boundary). An equation with no
// operands that the split-micro-batches pass consumes; anywhere else it is an error there.
std::vector<SVal> Sema::lowerStageBoundary(const ast::Expr &c) {
  bindArgs(c, {}, 0);
  if (cur_->mesh)
    failWithCallChain(DiagId::StageBoundaryOutsidePipeline, c.loc, "stage_boundary() inside a shmap body",
                      "mark stages in host code: a stage is a whole submesh, and its shmaps run inside it");
  ir::Eqn e;
  e.prim = ir::Prim::StageBoundary;
  e.loc = c.loc;
  pushEqn(std::move(e));
  return {};
}

} // namespace shmapc::sema
