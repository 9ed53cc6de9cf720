// The static communication report (Comm.h): a walk of the program from `main` that follows
// codegen's lowering (codegen/ControlFlow.cpp's loops, calls and conditionals) and asks each
// collective's `comm` rule (compiler/prims/) for its runtime collective and bytes; and its
// printer.
#include "comm/Comm.h"
#include "rules/Rules.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace shmapc::comm {

using namespace ir;
using rules::collectiveKindName;
using rules::CollectiveKind;
using rules::kNumCollectiveKinds;

bool StatsTable::operator==(const StatsTable &o) const {
  for (int k = 0; k < kNumCollectiveKinds; ++k)
    if (!(rows[k] == o.rows[k])) return false;
  return true;
}

namespace {

// ---- arithmetic on tables and counts ------------------------------------------------------

// Saturating at kUnbounded (a while loop's count), which absorbs every nonzero operand.
int64_t mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  int64_t r;
  if (a == kUnbounded || b == kUnbounded || __builtin_mul_overflow(a, b, &r)) return kUnbounded;
  return r;
}
int64_t add(int64_t a, int64_t b) {
  int64_t r;
  if (a == kUnbounded || b == kUnbounded || __builtin_add_overflow(a, b, &r)) return kUnbounded;
  return r;
}

Count times(Count c, int64_t k) { return {mul(c.lo, k), mul(c.hi, k)}; }
Count times(Count a, Count b) { return {mul(a.lo, b.lo), mul(a.hi, b.hi)}; }
Count plus(Count a, Count b) { return {add(a.lo, b.lo), add(a.hi, b.hi)}; }

void addInto(StatsTable &a, const StatsTable &b, int64_t k = 1) {
  for (int i = 0; i < kNumCollectiveKinds; ++i) {
    a.rows[i].calls = add(a.rows[i].calls, mul(k, b.rows[i].calls));
    a.rows[i].bytesSent = add(a.rows[i].bytesSent, mul(k, b.rows[i].bytesSent));
    a.rows[i].bytesReceived = add(a.rows[i].bytesReceived, mul(k, b.rows[i].bytesReceived));
  }
}
void addInto(StatsBounds &a, const StatsBounds &b, int64_t k = 1) {
  addInto(a.lo, b.lo, k);
  addInto(a.hi, b.hi, k);
}
// Only one of two branches runs: cell by cell the smaller low and the larger high bound.
StatsBounds either(const StatsBounds &a, const StatsBounds &b) {
  StatsBounds r;
  for (int i = 0; i < kNumCollectiveKinds; ++i) {
    auto lo = [](int64_t x, int64_t y) { return std::min(x, y); };
    auto hi = [](int64_t x, int64_t y) { return std::max(x, y); };
    const StatsRow &al = a.lo.rows[i], &bl = b.lo.rows[i], &ah = a.hi.rows[i], &bh = b.hi.rows[i];
    r.lo.rows[i] = {lo(al.calls, bl.calls), lo(al.bytesSent, bl.bytesSent),
                    lo(al.bytesReceived, bl.bytesReceived)};
    r.hi.rows[i] = {hi(ah.calls, bh.calls), hi(ah.bytesSent, bh.bytesSent),
                    hi(ah.bytesReceived, bh.bytesReceived)};
  }
  return r;
}

// ---- one collective: the runtime's byte model ---------------------------------------------

CommOp describe(const Eqn &e, const Mesh &mesh) {
  const rules::Communication &comm = rules::rulesOf(e.prim).comm;
  CommOp op;
  op.eqn = &e;
  op.mesh = &mesh;
  op.communicates = comm.what == rules::Communication::Collective;
  op.kind = comm.kind;
  op.groupSize = 1;
  if (e.has("axes"))
    for (int64_t a : e.intsParam("axes"))
      if (a >= 0 && a < (int64_t)mesh.sizes.size()) op.groupSize *= mesh.sizes[a];
  const int64_t n = std::max<int64_t>(1, op.groupSize);
  op.numGroups = mesh.numDevices() / n;
  if (!op.communicates || e.ins.empty()) return op;
  const rules::CollectiveBytes c = comm.bytes(e, n, op.numGroups);
  op.sentMin = c.sentMin;
  op.sentMax = c.sentMax;
  op.receivedMin = c.receivedMin;
  op.receivedMax = c.receivedMax;
  op.chunkMin = c.chunkMin;
  op.chunkMax = c.chunkMax;
  op.receivers = c.receivers;
  op.perCall = {1, c.sent, c.received};
  return op;
}

// ---- the walk -------------------------------------------------------------------------------

class Analyzer {
public:
  explicit Analyzer(const Module &m) : m_(m) {}

  CommReport run() {
    if (m_.main) report_.total = walk(*m_.main, nullptr, {1, 1}, nullptr);
    report_.pipelines = pipelineMessages(m_);
    return std::move(report_);
  }

private:
  // Runs `f` once: returns the table of that run. `mesh` is the shmap's mesh inside a body
  // (null on the host); `mult` how often `f` runs per run of the enclosing shmap (per
  // program on the host); collectives are appended to `out` (null on the host).
  StatsBounds walk(const Func &f, const Mesh *mesh, Count mult, std::vector<CommNode> *out) {
    StatsBounds cost;
    // A node for equation `e` run `perRun` times, and its listing where its bodies communicate.
    auto nodeOf = [](CommNode::Kind kind, const Eqn &e, Count perRun) {
      CommNode node;
      node.kind = kind;
      node.eqn = &e;
      node.perRun = perRun;
      return node;
    };
    auto listIfItCommunicates = [&](CommNode &&node) {
      if (out && (!node.children.empty() || !node.elseChildren.empty())) out->push_back(std::move(node));
    };
    for (const Eqn &e : f.eqns) {
      // A collective its rule says moves data is listed and counted, pscatter (Free) listed at
      // no cost; pbroadcast (inserted wherever an invariant value meets a varying one), its
      // inverse invariant_cast and axis_index (Local) are not listed: they never communicate.
      if (rules::rulesOf(e.prim).comm.what != rules::Communication::Local) {
        if (!mesh || !out) continue;
        CommNode node = nodeOf(CommNode::Op, e, mult);
        node.op = describe(e, *mesh);
        if (node.op.communicates) {
          StatsTable one;
          one.rows[(int)node.op.kind] = node.op.perCall;
          addInto(cost.lo, one);
          addInto(cost.hi, one);
        }
        out->push_back(std::move(node));
        continue;
      }
      switch (e.prim) {
      case Prim::Shmap: {
        if (e.bodies.empty()) break;
        const Func &body = *e.bodies[0];
        CommShmap &s = shmap(body, e);
        s.runs = plus(s.runs, mult);
        if (std::find(s.sites.begin(), s.sites.end(), &e) == s.sites.end()) s.sites.push_back(&e);
        addInto(cost, s.perRun);
        break;
      }
      case Prim::Loop: {
        if (e.bodies.empty()) break;
        int64_t lo = e.intParam("lo"), hi = e.intParam("hi");
        const int64_t trips = hi > lo ? hi - lo : 0;
        CommNode node = nodeOf(CommNode::Loop, e, times(mult, trips));
        node.trips = trips;
        StatsBounds c = walk(*e.bodies[0], mesh, node.perRun, out ? &node.children : nullptr);
        addInto(cost, c, node.trips);
        listIfItCommunicates(std::move(node));
        break;
      }
      case Prim::While: {
        // The predicate runs once more than the body, which runs a number of times known
        // only at run time: at least the predicate once, at most without bound.
        if (e.bodies.size() != 2) break;
        Count many{0, mult.hi ? kUnbounded : 0};
        CommNode node = nodeOf(CommNode::While, e, many);
        StatsBounds p = walk(*e.bodies[0], mesh, plus(mult, many), out ? &node.children : nullptr);
        StatsBounds b = walk(*e.bodies[1], mesh, many, out ? &node.elseChildren : nullptr);
        addInto(cost.lo, p.lo);
        addInto(cost.hi, p.hi, kUnbounded);
        addInto(cost.hi, b.hi, kUnbounded);
        // Listed once per source loop (a jvp's copy of a loop keeps its location).
        auto sameLoop = [&](const Eqn *o) {
          return o == &e || (e.loc.valid() && o->loc.file == e.loc.file &&
                             o->loc.line == e.loc.line && o->loc.col == e.loc.col);
        };
        std::vector<const Eqn *> &listed = report_.communicatingWhiles;
        if ((!(p.hi == StatsTable{}) || !(b.hi == StatsTable{})) &&
            std::none_of(listed.begin(), listed.end(), sameLoop))
          listed.push_back(&e);
        listIfItCommunicates(std::move(node));
        break;
      }
      case Prim::Call: {
        if (e.bodies.empty()) break;
        CommNode node = nodeOf(CommNode::Call, e, mult);
        addInto(cost, walk(*e.bodies[0], mesh, mult, out ? &node.children : nullptr));
        listIfItCommunicates(std::move(node));
        break;
      }
      case Prim::Cond: {
        if (e.bodies.size() != 2) break;
        CommNode node = nodeOf(CommNode::Cond, e, mult);
        node.bothBranches = rules::condRunsBothBranches(f, e);
        // A branch runs as often as the cond, or (only the taken one running) possibly never.
        Count branch = node.bothBranches ? mult : Count{0, mult.hi};
        StatsBounds t = walk(*e.bodies[0], mesh, branch, out ? &node.children : nullptr);
        StatsBounds fl = walk(*e.bodies[1], mesh, branch, out ? &node.elseChildren : nullptr);
        if (node.bothBranches) {
          addInto(cost, t);
          addInto(cost, fl);
        } else {
          addInto(cost, either(t, fl));
          node.dataDependent = t.lo != fl.lo || t.hi != fl.hi;
          if (node.dataDependent && seenConds_.insert(&e).second)
            report_.dataDependentConds.push_back(&e);
        }
        listIfItCommunicates(std::move(node));
        break;
      }
      case Prim::PipeSend:
      case Prim::PipeRecv: {  // a pipeline's message: sent by one group, received by another
        StatsTable one;
        StatsRow &row = one.rows[(int)CollectiveKind::PointToPoint];
        const int64_t bytes = (e.prim == Prim::PipeSend ? e.ins[0] : e.outs[0])->type.byteSize();
        if (e.prim == Prim::PipeSend) row.calls = 1, row.bytesSent = bytes;
        else row.bytesReceived = bytes;
        addInto(cost.lo, one);
        addInto(cost.hi, one);
        break;
      }
      case Prim::Pipeline:  // every device group's stage program, once per run (each on its own devices)
        for (const Func *program : e.bodies) addInto(cost, walk(*program, mesh, mult, nullptr));
        break;
      default: break;  // jvp/vjp are gone after the differentiate pass; the rest is local
      }
    }
    return cost;
  }

  // The report entry of a shmap body, created (and its body walked once) on first use.
  CommShmap &shmap(const Func &body, const Eqn &site) {
    auto it = index_.find(&body);
    if (it != index_.end()) return report_.shmaps[it->second];
    CommShmap s;
    s.body = &body;
    s.mesh = body.mesh;
    if (!s.mesh && site.has("mesh")) {
      int64_t k = site.intParam("mesh");
      if (k >= 0 && k < (int64_t)m_.meshes.size()) s.mesh = m_.meshes[k].get();
    }
    // Register first: a body never contains a shmap, but keep the index valid regardless.
    index_[&body] = report_.shmaps.size();
    report_.shmaps.push_back(CommShmap{});
    if (s.mesh) s.perRun = walk(body, s.mesh, {1, 1}, &s.nodes);
    CommShmap &slot = report_.shmaps[index_[&body]];
    slot = std::move(s);
    return slot;
  }

  const Module &m_;
  CommReport report_;
  std::map<const Func *, size_t> index_;
  std::set<const Eqn *> seenConds_;
};

// ---- printing -------------------------------------------------------------------------------

std::string locString(const Loc &loc, const SourceManager *sm) {
  if (!sm || !loc.valid() || loc.file >= sm->count()) return "";
  return sm->file(loc.file).path + ":" + std::to_string(loc.line) + ":" +
         std::to_string(loc.col);
}

std::string number(int64_t n) { return n == kUnbounded ? "unbounded" : std::to_string(n); }
std::string rangeString(int64_t lo, int64_t hi) {
  return lo == hi ? number(lo) : number(lo) + ".." + number(hi);
}
std::string countString(Count c) { return rangeString(c.lo, c.hi); }
std::string plural(Count c, const char *one, const char *many) {
  return countString(c) + " " + (c.exact() && c.lo == 1 ? one : many);
}

std::string axisNames(const std::vector<int64_t> &axes, const Mesh *mesh) {
  std::string s = "(";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (i) s += ",";
    if (mesh && axes[i] >= 0 && axes[i] < (int64_t)mesh->axes.size()) s += mesh->axes[axes[i]];
    else s += "#" + std::to_string(axes[i]);
  }
  return s + ")";
}

std::string meshString(const Mesh *mesh) {
  if (!mesh) return "mesh ?";
  std::string s = "mesh " + mesh->name + ":";
  for (size_t i = 0; i < mesh->axes.size(); ++i)
    s += (i ? ", " : " ") + mesh->axes[i] + "=" + std::to_string(mesh->sizes[i]);
  int64_t n = mesh->numDevices();
  return s + "; " + std::to_string(n) + (n == 1 ? " device" : " devices");
}

// `psum2[axes=(i)] f32[8]{i} -> f32[8]`: the primitive as --emit=ir names it, its params, and
// the per-device block types in and out.
std::string opString(const Eqn &e, const Mesh *mesh) {
  std::string s = primName(e.prim);
  std::vector<std::string> items;
  for (const auto &[k, v] : e.params) {
    if (k == "axes") {
      if (auto *a = std::get_if<std::vector<int64_t>>(&v)) items.push_back("axes=" + axisNames(*a, mesh));
    } else if (k == "perm") {
      if (auto *p = std::get_if<std::vector<int64_t>>(&v)) {
        std::string q = "perm=[";
        for (size_t i = 0; i + 1 < p->size(); i += 2)
          q += (i ? "," : "") + std::string("(") + std::to_string((*p)[i]) + "," +
               std::to_string((*p)[i + 1]) + ")";
        items.push_back(q + "]");
      }
    } else if (auto *i = std::get_if<int64_t>(&v)) {
      items.push_back(k + "=" + std::to_string(*i));
    }
  }
  if (!items.empty()) {
    s += "[";
    for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
    s += "]";
  }
  if (!e.ins.empty()) s += " " + typeToString(e.ins[0]->type, mesh);
  if (!e.outs.empty()) s += " -> " + typeToString(e.outs[0]->type, mesh);
  return s;
}

std::string bytesString(int64_t lo, int64_t hi) { return rangeString(lo, hi) + " B"; }

class ReportPrinter {
public:
  ReportPrinter(std::ostringstream &out, const SourceManager *sm) : out_(out), sm_(sm) {}

  void report(const CommReport &r) {
    out_ << "== communication (static) ==\n";
    out_ << "(bytes over all devices; pbroadcast, invariant_cast and axis_index never communicate and "
            "are not listed)\n";
    if (r.shmaps.empty()) out_ << "(no shmaps)\n";
    for (const CommShmap &s : r.shmaps) shmap(s);
    out_ << printPipelineMessages(r.pipelines);
    totals(r);
  }

private:
  void indent(int depth) {
    for (int i = 0; i < depth; ++i) out_ << "  ";
  }
  std::string at(const Loc &loc) {
    std::string l = locString(loc, sm_);
    return l.empty() ? "" : " at " + l;
  }

  void shmap(const CommShmap &s) {
    out_ << "shmap @" << s.body->name << " (" << meshString(s.mesh) << "), runs "
         << plural(s.runs, "time", "times");
    std::vector<std::string> sites;
    for (const Eqn *e : s.sites) {
      std::string l = locString(e->loc, sm_);
      if (!l.empty() && std::find(sites.begin(), sites.end(), l) == sites.end()) sites.push_back(l);
    }
    if (!sites.empty()) {
      out_ << " (called at ";
      for (size_t i = 0; i < sites.size(); ++i) out_ << (i ? ", " : "") << sites[i];
      out_ << ")";
    }
    out_ << "\n";
    for (const Eqn *e : s.sites)  // (a pipeline's hoisted weight-gradient all-reduces)
      if (e->has("hoisted_from_steps")) {
        out_ << "  hoisted: these all-reduces ran in each of " << e->intParam("hoisted_from_steps")
             << " backward steps (a micro-batch each); now once per step, on the steps' summed parts\n";
        break;
      }
    if (s.nodes.empty()) {
      out_ << "  no collectives\n";
      moves(s);
      return;
    }
    current_ = &s;
    nodes(s.nodes, 1);
    int64_t callsLo = 0, callsHi = 0, sentLo = 0, sentHi = 0, recvLo = 0, recvHi = 0;
    for (int k = 0; k < kNumCollectiveKinds; ++k) {
      callsLo = add(callsLo, s.perRun.lo.rows[k].calls);
      callsHi = add(callsHi, s.perRun.hi.rows[k].calls);
      sentLo = add(sentLo, s.perRun.lo.rows[k].bytesSent);
      sentHi = add(sentHi, s.perRun.hi.rows[k].bytesSent);
      recvLo = add(recvLo, s.perRun.lo.rows[k].bytesReceived);
      recvHi = add(recvHi, s.perRun.hi.rows[k].bytesReceived);
    }
    out_ << "  per run, all devices: " << rangeString(callsLo, callsHi)
         << (callsLo == 1 && callsHi == 1 ? " call" : " calls") << ", sent "
         << bytesString(sentLo, sentHi) << ", received " << bytesString(recvLo, recvHi) << "\n";
  }

  // An identity shmap that moves a value between the host and the devices (ir::identityShmap):
  // what moves, which no collective does and --stats does not count.
  void moves(const CommShmap &s) {
    for (const Eqn *e : s.sites) {
      if (!e->has("moves") || e->ins.empty()) continue;
      const Type &t = e->ins[0]->type;
      const std::string what = ir::typeToString(t, nullptr) + " (" + std::to_string(t.byteSize()) + " B)";
      if (e->strParam("moves") == "to_host")
        out_ << "  gathers " << what << " kept split on the devices for host code: in one process the blocks are "
             << "copied into the whole array; under MPI each rank receives the blocks its own devices do not "
             << "hold (not a collective: not in --stats)\n";
      else
        out_ << "  places " << what << " on the devices: each device reads its block of the host's value, and "
             << "under MPI a rank keeps only its devices' blocks; nothing is sent\n";
      return;
    }
  }

  void nodes(const std::vector<CommNode> &ns, int depth) {
    for (const CommNode &n : ns) node(n, depth);
  }

  void node(const CommNode &n, int depth) {
    const Mesh *mesh = current_->mesh;
    indent(depth);
    switch (n.kind) {
    case CommNode::Op: {
      out_ << opString(*n.eqn, mesh) << at(n.eqn->loc) << "\n";
      const CommOp &op = n.op;
      indent(depth + 2);
      if (!op.communicates) {
        out_ << "no communication (each device keeps its own block; not counted)\n";
        return;
      }
      out_ << "per device and call: sent " << bytesString(op.sentMin, op.sentMax)
           << ", received ";
      if (op.kind == CollectiveKind::Ppermute && op.receivedMin != op.receivedMax)
        out_ << op.receivedMax << " B on " << op.receivers << " of " << op.groupSize
             << " members, 0 B on the others";
      else
        out_ << bytesString(op.receivedMin, op.receivedMax);
      out_ << " (runtime " << collectiveKindName(op.kind) << ", " << op.numGroups
           << (op.numGroups == 1 ? " group of " : " groups of ") << op.groupSize;
      if (op.chunkMin != op.chunkMax)
        out_ << "; chunks of " << op.chunkMin << " or " << op.chunkMax << " elements";
      out_ << ")\n";
      Count all = times(current_->runs, n.perRun);
      indent(depth + 2);
      out_ << "x" << countString(n.perRun) << " per run, " << plural(all, "call", "calls")
           << " in all: sent "
           << bytesString(mul(all.lo, op.perCall.bytesSent), mul(all.hi, op.perCall.bytesSent))
           << ", received "
           << bytesString(mul(all.lo, op.perCall.bytesReceived),
                          mul(all.hi, op.perCall.bytesReceived))
           << " over all devices\n";
      return;
    }
    case CommNode::Loop:
      out_ << "loop range(" << n.eqn->intParam("lo") << ", " << n.eqn->intParam("hi") << "), "
           << n.trips << (n.trips == 1 ? " iteration" : " iterations") << at(n.eqn->loc)
           << ":\n";
      nodes(n.children, depth + 1);
      return;
    case CommNode::While:
      out_ << "while" << at(n.eqn->loc)
           << ": the trip count is known only at run time (the condition runs once more)\n";
      indent(depth + 1);
      out_ << "condition:" << (n.children.empty() ? " no collectives" : "") << "\n";
      nodes(n.children, depth + 2);
      indent(depth + 1);
      out_ << "body:" << (n.elseChildren.empty() ? " no collectives" : "") << "\n";
      nodes(n.elseChildren, depth + 2);
      return;
    case CommNode::Call:
      out_ << "call @" << n.eqn->bodies[0]->name << at(n.eqn->loc) << ":\n";
      nodes(n.children, depth + 1);
      return;
    case CommNode::Cond:
      out_ << "if" << at(n.eqn->loc) << ": ";
      if (n.bothBranches)
        out_ << "devices may take different branches and a branch communicates, so every "
                "device runs both\n";
      else
        out_ << "only the taken branch runs"
             << (n.dataDependent ? " (not known statically: data-dependent)" : "") << "\n";
      indent(depth + 1);
      out_ << "true branch:" << (n.children.empty() ? " no collectives" : "") << "\n";
      nodes(n.children, depth + 2);
      indent(depth + 1);
      out_ << "false branch:" << (n.elseChildren.empty() ? " no collectives" : "") << "\n";
      nodes(n.elseChildren, depth + 2);
      return;
    }
  }

  void totals(const CommReport &r) {
    if (r.total.exact()) {
      out_ << "total over all devices and the whole program (the runtime's --stats table):\n";
      out_ << printStatsTable(r.total.lo);
      return;
    }
    out_ << "total over all devices and the whole program: data-dependent.\n";
    if (!r.dataDependentConds.empty()) out_ << "Only the taken branch runs at\n";
    for (const Eqn *e : r.dataDependentConds) {
      std::string l = locString(e->loc, sm_);
      out_ << "  if" << (l.empty() ? " (no source location)" : " at " + l) << "\n";
    }
    if (!r.communicatingWhiles.empty())
      out_ << "These while loops communicate and run as often as their conditions say\n";
    for (const Eqn *e : r.communicatingWhiles) {
      std::string l = locString(e->loc, sm_);
      out_ << "  while" << (l.empty() ? " (no source location)" : " at " + l) << "\n";
    }
    out_ << "so the runtime's --stats table lies between these two, cell by cell:\n";
    out_ << printStatsTable(r.total.lo, "shmap collective stats (at least)");
    out_ << printStatsTable(r.total.hi, "shmap collective stats (at most)");
  }

  std::ostringstream &out_;
  const SourceManager *sm_;
  const CommShmap *current_ = nullptr;
};

} // namespace

CommReport analyzeCommunication(const Module &m) { return Analyzer(m).run(); }

std::string printCommReport(const CommReport &r, const SourceManager *sm) {
  std::ostringstream out;
  ReportPrinter(out, sm).report(r);
  return out.str();
}

// Exactly runtime/stats.cpp's stats_print.
std::string printStatsTable(const StatsTable &t, const std::string &title) {
  std::string s = "== " + title + " ==\n";
  char line[160];
  std::snprintf(line, sizeof line, "%-15s %5s %12s %16s\n", "collective", "calls", "bytes_sent",
                "bytes_received");
  s += line;
  bool any = false;
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    const StatsRow &row = t.rows[k];
    if (row.calls == 0) continue;
    any = true;
    std::snprintf(line, sizeof line, "%-15s %5s %12s %16s\n", collectiveKindName((CollectiveKind)k),
                  number(row.calls).c_str(), number(row.bytesSent).c_str(),
                  number(row.bytesReceived).c_str());
    s += line;
  }
  if (!any) s += "(no collectives)\n";
  return s;
}

} // namespace shmapc::comm
