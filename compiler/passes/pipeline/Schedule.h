// Pipeline schedules: the order in which each device group (a slice of the mesh along the stage
// axis) runs the forward (F), backward (B) and, for zero-bubble schedules, weight-gradient (W)
// steps of its stages for each micro-batch; the check that an order cannot deadlock; and the
// clock-by-stage grid --emit=schedule prints.
#pragma once
#include "ir/IR.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace shmapc::passes {

struct PipelineStep {
  enum Kind { F, B, W } kind = F;
  int stage = 0;  // the (virtual) stage; it runs on device group placement[stage]
  int mb = 0;     // the micro-batch
  bool operator==(const PipelineStep &o) const { return kind == o.kind && stage == o.stage && mb == o.mb; }
};
const char *stepKindName(PipelineStep::Kind k);  // "F", "B", "W"
std::string stepName(const PipelineStep &s);     // "F s1 mb5"
std::string writtenStep(const PipelineStep &s);  // "F1.5", as order= and --emit=schedule write it

struct PipelineSchedule {
  ir::Schedule kind = ir::Schedule::GPipe;
  int groups = 1, virtualStages = 1, microbatches = 1;
  std::vector<int> placement;  // per stage: its device group (round-robin unless placed)
  bool placed = false;         // placement= or order= gave it: no textbook formula
  bool written = false;        // order= gave it: its deadlocks name steps as written there
  int stages() const { return (int)placement.size(); }
  int groupOf(int stage) const { return placement[(size_t)stage]; }
  std::vector<std::vector<PipelineStep>> steps;  // per device group, in the order it runs them
};

// The schedule's steps, virtual stage v on device group v mod groups. Costs in clock units: F 1;
// B 2 (input and weight gradients), or 1 under zb-h1, whose W is 1. "" or why the schedule
// cannot be made (interleaved needs the micro-batches a multiple of the device groups).
std::string makeSchedule(ir::Schedule kind, int groups, int virtualStages, int microbatches, PipelineSchedule &out);

// The schedule with stage k on device group placement[k] (gpipe, 1f1b, zb-h1, inference): the
// schedule run as if each stage had a device group of its own, each group then running its
// stages' steps in the order they start there. That order is one the stages' data flow allows
// everywhere at once, so no placement deadlocks.
void makePlacedSchedule(ir::Schedule kind, const std::vector<int> &placement, int groups, int microbatches,
                        PipelineSchedule &out);

// order=: device group g's steps as written, "F0.0 F0.1 B0.0 B0.1" (kind, stage, '.', micro-batch;
// "F1" for micro-batch 1 where the group holds one stage). Each of the group's stages' steps
// exactly once. "" or what is wrong, with `at` the offset in `text` it is about (or -1).
std::string parseOrder(const std::string &text, int group, PipelineSchedule &s, int &at);
// An order= string's steps as written, each with its offset in the string (separated by spaces,
// tabs or commas).
std::vector<std::pair<size_t, std::string>> orderTokens(const std::string &text);

// A pipeline function's schedule from its attributes (placement=, order=, or the schedule's
// own). "" or why not; `order` and `at` say where in which order= string, when it is about one.
std::string pipelineSchedule(const ir::PipelineFunc &p, PipelineSchedule &out, int &order, int &at);

// Runs the steps in order, each device group one step at a time, a step starting once the steps
// it needs have finished: F s mb needs F s-1 mb (the activations), B s mb needs F s mb and B s+1 mb
// (the cotangent), W s mb needs B s mb. Returns "" and the timeline if every group finishes;
// otherwise the deadlock, naming two steps that wait for each other's groups.
struct PipelineTimeline {
  std::vector<std::vector<int64_t>> start;  // per group, per step: its start clock
  int64_t makespan = 0;
  int64_t busy = 0;      // clock units of work, all groups together
  std::vector<int> held; // per group: the most micro-batches whose activations it holds at once
                         // (forward run, backward (B) not yet): its activation buffers
  double bubble() const; // idle / (groups x makespan)
};
// `stuck` (if given) is the blocked step's group and place in its list.
std::string simulateSchedule(const PipelineSchedule &s, PipelineTimeline &out,
                             std::pair<int, size_t> *stuck = nullptr);
int64_t stepCost(const PipelineSchedule &s, const PipelineStep &step);
// The steps `step` waits for (above).
std::vector<PipelineStep> stepNeeds(const PipelineSchedule &s, const PipelineStep &step);

// The same run with each step taking `seconds(step)` (durations measured on a machine, for
// schedules larger than it runs): the bubble, idle / (groups x makespan); -1 if it deadlocks.
double replaySchedule(const PipelineSchedule &s, const std::function<double(const PipelineStep &)> &seconds);

// The textbook bubble fraction of a schedule with these costs: (S-1)/(M+S-1) for GPipe and 1F1B,
// (S-1)/(V M + S-1) interleaved, (S-1)/(3M+S-1) zb-h1 (for M >= S; with fewer micro-batches
// it is at most 1F1B's), (S-1)/(M+S-1) inference.
double theoreticalBubble(const PipelineSchedule &s);

// --emit=schedule and --emit=stages: every pipeline of the module.
std::string printSchedules(const ir::Module &m);
// A function's planned host memory (codegen's): its arena, and its blocks arena (values kept as
// the devices' blocks) where one process runs every device; one allocation a call for each.
struct PlannedMemory {
  int64_t arena = 0, blocks = 0;
  bool hasBlocks = false;
};
// `planned` (if given): each function's, of which the stage programs' are printed.
std::string printStages(const ir::Module &m, const std::map<const ir::Func *, PlannedMemory> *planned = nullptr);

} // namespace shmapc::passes
