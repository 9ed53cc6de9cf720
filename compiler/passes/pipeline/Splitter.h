// The split-micro-batches pass's work on one pipeline function (private to passes/pipeline/):
// the analysis of its differentiated function (which values are per example: PerExample.cpp)
// and the micro-batch function (MicroBatches.cpp),
// the stage functions and stage programs that replace its grad (StagePrograms.cpp).
#pragma once
#include "passes/pipeline/Pipeline.h"
#include "passes/pipeline/Schedule.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace shmapc::passes::pipeline {

using namespace ir;

// What a value of the differentiated function is with respect to the batch.
struct Info {
  int split = -1;     // the dimension whose major part indexes examples; -1: not per example
  bool batch = false; // depends on the batch arguments
  bool theta = false; // depends on the differentiated parameters
  bool tail = false;  // depends on a sum over examples of values that depend on the parameters
  // In a shmap body: for a per-example value, the mesh axes its examples are split over (major
  // to minor); for any value, the axes it may differ along from device to device.
  std::vector<int> axes;
  AxisSet varies = 0;
};

class Splitter {
public:
  // `schedule`: the pipeline's, checked to run without deadlock, whose simulation predicts the
  // bubble `bubble`.
  Splitter(Module &m, PipelineFunc &p, Diagnostics &diags, const PipelineSchedule &schedule, double bubble)
      : m_(m), p_(p), diags_(diags), M_(p.microbatches), schedule_(schedule), bubble_(bubble) {}
  void run();
  // The inference schedule: the pipeline function itself evaluated over micro-batches
  // (Inference.cpp).
  void runInference();

private:

  [[noreturn]] void fail(DiagId id, Loc loc, const std::string &msg, const std::string &hint);

  // The one grad / value_and_grad of the pipeline function, in its own body.
  void findGrad(Func &F);

  // Which of the differentiated function's parameters are batch arguments.
  void findBatch(Func &F, const Eqn &V);

  void analyse();

  // The equations of the differentiated function or of a shmap body in it (`f.mesh` set).
  void analyseEqns(const Func &f);

  // An equation with a per-example operand: which results are per example, which sum over
  // examples, and which operands without the split must be sliced to the micro-batch.
  // `inBody`: in a shmap body, where no value of the whole batch can be computed first.
  void splitEqn(const Eqn &e, const Info &in, bool inBody);

  // A shmap with per-example operands: its body analysed on their blocks (each device's
  // examples), its results per example where the out_specs put the examples back in order.
  void splitShmap(const Eqn &e, const Info &in);

  // A loop with per-example operands: its body analysed with its carries per example where
  // their initial values are, or where its step makes them so.
  void splitLoop(const Eqn &e, const Info &in);
  // A while loop likewise (its condition may not read the examples: each micro-batch would stop
  // after its own number of steps), and a conditional: each branch analysed on the operands,
  // its results per example alike in both (its condition again not read from the examples).
  void splitWhile(const Eqn &e, const Info &in);
  void splitCond(const Eqn &e, const Info &in);
  // Both loops': their carries' analysis over `bodies` (whose parameters from `first` on are
  // the operands), `step` the body returning the carries; `introduce`: a carry may become per
  // example in the step (its initial value then sliced).
  void splitCarries(const Eqn &e, const Info &in, const std::vector<const Func *> &bodies, const Func &step,
                    size_t first, bool introduce, const char *what);
  void checkCondition(const Eqn &e, const Info &pred, const char *what);

  // A collective of a per-example value: which axes split its examples afterwards, refused
  // where it would combine different devices' examples.
  void splitCollective(const Eqn &e, const Info &in, const Mesh &mesh);

  // A value that depends on the batch's sums may only be combined affinely.
  void checkAffine(const Eqn &e);

  // The stages: the equations between markers.
  void checkStages();

  void recordStages(int64_t stages);

  Value *constant(Func &f, double v, const Type &t);

  Value *binary(Func &f, Prim p, Value *a, Value *b, Value *into = nullptr);

  // x's micro-batch `index` along dimension d: a splat or a broadcast that does not vary along d
  // made again at the micro-batch's size, anything else sliced (in a shmap body, with no
  // index, refused at `loc`).
  Value *slice(Func &f, Value *x, int d, Value *index, Loc loc = {});

  // Copies (the `keep` ones of) `src`'s equations into `dst` at micro-batch sizes through `vm`:
  // per-example dimensions divided by M, sums over examples that depend on the parameters
  // scaled by M, shmap bodies with per-example values rebuilt likewise. `stageOf`: per
  // equation of src its stage, appended to mbStage_ per equation of dst.
  void copyAtMicroBatch(const Func &src, Func &dst, std::map<const Value *, Value *> &vm,
                        const std::vector<bool> *keep, Value *index, const std::vector<int> *stageOf);

  // A shmap body with per-example parameters at micro-batch sizes.
  Func *rebuildBody(const Func &b);

  // Drops equations of `f` whose results nothing reads (the whole-size values slice() made again).
  static void removeUnread(Func &f, std::vector<int> *stageOf);

  // The differentiated function on one micro-batch: (micro-batch index, its params with the
  // batch's micro-batch part, the whole batch's data values) -> the loss with sums scaled by M.
  Func *microBatchFunc();

  // The stage shmaps on the pipeline's mesh moved to its stage submesh (Submesh.cpp); with
  // placement= on meshes, each stage's shmaps on its group's mesh moved to the group's copy.
  void stageShmapsOnSubmeshes(Func &mb);
  void stageShmapsOnGroupMesh(Eqn &e, int group);
  int64_t groupMesh(int group);  // made at the first use
  int64_t stageSubmesh();  // made at the first use
  void remapToSubmesh(Func &body);

  // Where a stage program's step begins or ends (--trace spans).
  void marker(Func &f, const PipelineStep &step, bool begin);


  void send(Func &f, Value *x, int64_t channel);

  // The micro-batch function cut into one function per stage: f_v(its inputs) -> (what later
  // stages read of it, and the loss for the stage that computes it). An input is a parameter of
  // the micro-batch function or a value of an earlier stage (an activation); a constant another
  // stage made is made again rather than sent.
  struct StageFn {
    Func *f = nullptr;
    std::vector<const Value *> inputs;   // per param of f: the micro-batch function's value
    std::vector<const Value *> outputs;  // per result of f: likewise
  };

  std::vector<StageFn> stageFuncs(Func *mb);

  // F's grad replaced by: the whole-batch data values, then the pipeline: one stage program per
  // device group running its schedule's steps, the groups at once, trading activations and
  // their cotangents; then each parameter's gradient summed over the stages that read it.
  void rewrite(Func &F, Func *mb);
  void rewriteInference(Func &F, Func *mb);

  // T_ (its calls inlined) analysed and cut into stages: the micro-batch function, its stage
  // shmaps on the stage submesh.
  Func *stagedMicroBatchFunc();

  // The pipeline equation running `programs` (one per device group) on `consts`, its channels'
  // (sending, receiving) stages `ends`.
  // In stage program P, the value a step on micro-batch m reads for parameter i of the
  // micro-batch function: the micro-batch's index (i = 0), its slice of a batch argument (made
  // once per micro-batch in `batchSlices`), or the parameter or whole-batch data value itself.
  Value *microBatchArgument(Func &P, const std::vector<Value *> &params,
                            std::map<std::pair<int, int>, Value *> &batchSlices, int i, int m);

  // Per device of the pipeline (the stage axis's mesh, or the group meshes' devices one group
  // after another): its device group. The runtime gives MPI ranks their groups by it.
  std::vector<int64_t> deviceGroups() const;
  Eqn pipelineEqn(Loc loc, const std::vector<Value *> &consts, const std::vector<Func *> &programs,
                  const std::vector<std::pair<int, int>> &ends, bool remat);

  // The operands of the pipeline equation: the differentiated function's arguments `args`,
  // then the whole batch's data values, whose equations are copied into F (on the whole
  // batch) here.
  std::vector<Value *> wholeBatchInputs(Func &F, const std::vector<Value *> &args);

  Module &m_;
  PipelineFunc &p_;
  Diagnostics &diags_;
  const int64_t M_;
  const PipelineSchedule &schedule_;
  const double bubble_;
  size_t vIndex_ = 0, n_ = 0;
  int64_t submesh_ = -1;
  std::map<int, int64_t> groupMeshes_;  // device group -> the copy of its mesh its stage shmaps run on
  int loopDepth_ = 0;  // analysing a loop's body (no value of the whole batch computed first there)
  Func *T_ = nullptr;
  std::vector<bool> batchParam_;
  std::vector<int64_t> wrt_;
  std::map<const Value *, Info> info_;
  std::vector<size_t> boundaries_;
  std::vector<int> stageOf_;
  std::vector<const Value *> summedRoots_, dataRoots_;
  std::map<const Eqn *, std::vector<std::pair<int, int>>> slices_;  // equation -> (operand, dimension) to slice
  std::set<const Func *> splitBodies_;  // shmap bodies with per-example values
  std::vector<int> mbStage_;  // per equation of the micro-batch function: its stage
};

} // namespace shmapc::passes::pipeline
