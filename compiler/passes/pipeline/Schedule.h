// Pipeline schedules: the order in which each device group (a slice of the mesh along the stage
// axis) runs the forward (F), backward (B) and, for zero-bubble schedules, weight-gradient (W)
// steps of its stages for each micro-batch; the check that an order cannot deadlock; and the
// clock-by-stage grid --emit=schedule prints.
#pragma once
#include "ir/IR.h"

#include <functional>
#include <string>
#include <vector>

namespace shmapc::passes {

struct PipelineStep {
  enum Kind { F, B, W } kind = F;
  int stage = 0;  // the (virtual) stage: virtual stage v runs on device group v % groups
  int mb = 0;     // the micro-batch
  bool operator==(const PipelineStep &o) const { return kind == o.kind && stage == o.stage && mb == o.mb; }
};
std::string stepName(const PipelineStep &s);  // "F s1 mb5"

struct PipelineSchedule {
  ir::Schedule kind = ir::Schedule::GPipe;
  int groups = 1, virtualStages = 1, microbatches = 1;
  int stages() const { return groups * virtualStages; }
  std::vector<std::vector<PipelineStep>> steps;  // per device group, in the order it runs them
};

// The schedule's steps. Costs in clock units: F 1; B 2 (input and weight gradients), or 1 under
// zb-h1, whose W is 1. "" or why the schedule cannot be made (interleaved needs the
// micro-batches a multiple of the device groups).
std::string makeSchedule(ir::Schedule kind, int groups, int virtualStages, int microbatches, PipelineSchedule &out);

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
std::string simulateSchedule(const PipelineSchedule &s, PipelineTimeline &out);
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
std::string printStages(const ir::Module &m);

} // namespace shmapc::passes
