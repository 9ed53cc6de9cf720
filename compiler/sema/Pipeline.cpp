// @pipeline functions: sema checks the attributes against the mesh and the parameters and
// records the instance (ir::Module::pipelines); the split-micro-batches pass does the rest.
#include "sema/SemaImpl.h"

namespace shmapc::sema {

void Sema::recordPipeline(const ast::FuncDecl &decl, ir::Func &f, const std::vector<ArgDesc> &args) {
  const ast::PipelineAttrs &a = *decl.pipeline;
  ir::PipelineFunc p;
  p.name = f.name;
  p.loc = decl.loc;
  p.func = &f;
  p.mesh = meshIndex(a.mesh, a.meshLoc);
  const ir::Mesh &mesh = *module_->meshes[(size_t)p.mesh];
  p.stageAxis = axisIndex(mesh, a.axis, a.axisLoc);
  p.stageAxisSize = mesh.sizes[(size_t)p.stageAxis];
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
