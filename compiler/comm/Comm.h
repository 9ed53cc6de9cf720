// The static communication report (`--emit=comm`): for every shmap a program runs (forward and
// derived), each collective with its axes, types, the bytes each device sends and receives,
// and how often it runs; and the program's totals in exactly the form of the runtime's
// `--stats` table (docs/runtime.md, "Statistics"), computed from the IR before anything runs.
//
// The byte model is the runtime's, written at each collective's definition (its `comm` rule in
// compiler/prims/: AllReduce.cpp, Gather.cpp, Exchange.cpp, Rooted.cpp), per device and call;
// `calls` counts each collective once per execution (the runtime's device 0 counts).
#pragma once
#include "ir/IR.h"
#include "rules/Rules.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shmapc::comm {

using ir::Eqn;
using ir::Func;
using ir::Mesh;
using ir::Module;

using rules::CollectiveKind;
constexpr int kNumCommKinds = rules::kNumCollectiveKinds;

// How many times something runs: exactly `lo` when lo == hi, otherwise between lo and hi
// (data-dependent: below a conditional whose taken branch is not known statically).
// hi may be kUnbounded: a while loop runs a number of times known only at run time.
constexpr int64_t kUnbounded = INT64_MAX;
struct Count {
  int64_t lo = 0, hi = 0;
  bool exact() const { return lo == hi; }
};

// One row of the --stats table: calls, and bytes summed over all devices.
struct StatsRow {
  int64_t calls = 0, bytesSent = 0, bytesReceived = 0;
  bool operator==(const StatsRow &o) const {
    return calls == o.calls && bytesSent == o.bytesSent && bytesReceived == o.bytesReceived;
  }
};
struct StatsTable {
  StatsRow rows[kNumCommKinds];
  bool operator==(const StatsTable &o) const;
  bool operator!=(const StatsTable &o) const { return !(*this == o); }
};
// Bounds on the table: `lo` cell by cell the least, `hi` the most the program can do.
struct StatsBounds {
  StatsTable lo, hi;
  bool exact() const { return lo == hi; }
};

// One collective equation inside a shmap body (or a loop body, branch or callee in it).
struct CommOp {
  const Eqn *eqn = nullptr;
  const Mesh *mesh = nullptr;
  bool communicates = false;  // false: pscatter, listed but never counted
  CollectiveKind kind = CollectiveKind::Psum;
  int64_t groupSize = 1, numGroups = 1;  // groupSize * numGroups = the mesh's devices
  // Per device and call (ranges: psum's chunks may differ by one element; ppermute receives
  // only on devices some other member sends to).
  int64_t sentMin = 0, sentMax = 0, receivedMin = 0, receivedMax = 0;
  int64_t chunkMin = 0, chunkMax = 0;  // psum/pmax/pmin: elements of a member's chunk
  int64_t receivers = 0;               // ppermute: members per group that receive
  StatsRow perCall;  // 1 call, bytes summed over all devices
};

// The report as a tree following the body's structure: collectives, and the loops, calls and
// conditionals that contain some (others are left out).
struct CommNode {
  enum Kind { Op, Loop, While, Call, Cond } kind = Op;
  const Eqn *eqn = nullptr;
  CommOp op;                    // Op
  int64_t trips = 0;            // Loop: hi - lo (0 if hi <= lo)
  bool bothBranches = false;    // Cond: every device runs both branches
  bool dataDependent = false;   // Cond: the totals depend on the branch taken
  std::vector<CommNode> children;       // Loop, Call: the body; Cond: the true branch; While:
                                        // the predicate
  std::vector<CommNode> elseChildren;   // Cond: the false branch; While: the body
  Count perRun;                 // executions per run of the enclosing shmap
};

struct CommShmap {
  const Func *body = nullptr;
  const Mesh *mesh = nullptr;
  Count runs;                           // summed over every shmap equation that runs it
  std::vector<const Eqn *> sites;       // those equations, in program order
  std::vector<CommNode> nodes;
  StatsBounds perRun;                   // the table for one run of the body
};

// A pipeline's messages between two device groups of one type and the same two layouts.
struct CommMessages {
  size_t fromGroup = 0, toGroup = 0;
  std::string type;
  int64_t count = 0, bytes = 0;   // per run of the pipeline
  std::string sentAs, readAs;      // "whole" or a spec: the two ends' forms
};

struct CommPipeline {
  std::string label;
  int64_t count = 0, bytes = 0;  // per run
  std::vector<CommMessages> rows;
};

// Each pipeline's messages (PipelineMessages.cpp).
std::vector<CommPipeline> pipelineMessages(const Module &m);
std::string printPipelineMessages(const std::vector<CommPipeline> &pipelines);

struct CommReport {
  std::vector<CommShmap> shmaps;        // in the order the program first runs them
  std::vector<CommPipeline> pipelines;  // each pipeline equation's messages
  StatsBounds total;                    // the whole program, all devices
  // Conditionals (host or device) whose taken branch changes the totals, in program order.
  std::vector<const Eqn *> dataDependentConds;
  // While loops that communicate (their trip count is known only at run time), in program order.
  std::vector<const Eqn *> communicatingWhiles;
};

// Walks the program from `main` through calls, loops, conditionals and shmaps.
CommReport analyzeCommunication(const Module &m);

// `--emit=comm`. `sm` (may be null) turns locations into file:line:col.
std::string printCommReport(const CommReport &r, const SourceManager *sm);
// The runtime's --stats table for `t`, byte for byte (header line `== TITLE ==`).
std::string printStatsTable(const StatsTable &t, const std::string &title = "shmap collective stats");

} // namespace shmapc::comm
