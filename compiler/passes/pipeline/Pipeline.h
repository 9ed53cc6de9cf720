// Pipelines (@pipeline functions): the differentiated function cut into stages at its
// stage_boundary() markers and run over micro-batches of the batch arguments, with gradients
// accumulated exactly.
#pragma once
#include "ir/IR.h"
#include "source/Diagnostics.h"

#include <string>
#include <vector>

namespace shmapc::passes {

// Rewrites each pipeline function's grad (or value_and_grad) into a loop over its micro-batches
// that computes the same function: each micro-batch's loss is the loss with its batch sums
// scaled by the number of micro-batches (exact when the loss is an affine function of its sums
// over examples, which the pass checks, naming the equation that is not), gradients and value
// summed over micro-batches and divided by their number. Values of the batch alone that need the
// whole batch (a masked mean's count) are computed once, before the loop. A stage_boundary()
// elsewhere marks nothing (the model evaluated outside the pipeline) and is dropped, except in
// a pipeline function's own body, where it is an error.
void splitMicroBatches(ir::Module &m, Diagnostics &diags);

// After autodiff: each backward step of a pipeline's stage programs reads the residuals its
// forward step saved (the derived function's forward part moved to the forward step) instead of
// recomputing the stage's forward; under zb-h1 the weights' gradients move to the W step.
void keepStageResiduals(ir::Module &m, Diagnostics &diags);

// After keep-stage-residuals: a stage's all-reduce of a weight gradient over the axes its
// devices split the examples along runs once per step, on the sum of the micro-batches' parts,
// instead of once per micro-batch (psum is linear).
void hoistStageReductions(ir::Module &m, Diagnostics &diags);
// sink-updates-into-stages: the update after a training pipeline, in the programs of the groups
// whose gradients it reads (SinkUpdates.cpp).
void sinkUpdatesIntoStages(ir::Module &m, Diagnostics &diags);

} // namespace shmapc::passes
