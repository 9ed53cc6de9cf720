// Pipeline schedules (GPipe, 1F1B, Megatron's interleaved 1F1B, zero-bubble ZB-H1, inference)
// as per-device-group step lists, their deadlock check and their printed grids.
#include "passes/pipeline/Schedule.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace shmapc::passes {

namespace {

using Step = PipelineStep;

void gpipe(PipelineSchedule &s, bool backward) {
  for (int g = 0; g < s.groups; ++g) {
    for (int m = 0; m < s.microbatches; ++m) s.steps[(size_t)g].push_back({Step::F, g, m});
    if (backward)
      for (int m = 0; m < s.microbatches; ++m) s.steps[(size_t)g].push_back({Step::B, g, m});
  }
}

// PipeDream-Flush: S-1-s forwards to fill the pipeline, then one forward and one backward in
// turn, then the remaining backwards: at most S-s micro-batches' activations held.
void oneFOneB(PipelineSchedule &s) {
  const int S = s.groups, M = s.microbatches;
  for (int g = 0; g < S; ++g) {
    auto &out = s.steps[(size_t)g];
    const int warm = std::min(S - 1 - g, M);
    for (int m = 0; m < warm; ++m) out.push_back({Step::F, g, m});
    for (int i = 0; i < M - warm; ++i) {
      out.push_back({Step::F, g, warm + i});
      out.push_back({Step::B, g, i});
    }
    for (int m = M - warm; m < M; ++m) out.push_back({Step::B, g, m});
  }
}

// Megatron-LM's interleaved 1F1B: group d holds virtual stages d, d+S, ..., d+(V-1)S; micro-batches
// go through the chunks in rounds of S; warm-up (S-d-1)*2 + (V-1)*S forwards.
void interleaved(PipelineSchedule &s) {
  const int S = s.groups, V = s.virtualStages, M = s.microbatches, total = M * V;
  auto unit = [&](int k, bool forward, int g) {
    int chunk = (k / S) % V;
    if (!forward) chunk = V - 1 - chunk;
    int mb = (k / (S * V)) * S + k % S;
    return Step{forward ? Step::F : Step::B, chunk * S + g, mb};
  };
  for (int g = 0; g < S; ++g) {
    auto &out = s.steps[(size_t)g];
    const int warm = std::min((S - g - 1) * 2 + (V - 1) * S, total);
    int f = 0, b = 0;
    for (; f < warm; ++f) out.push_back(unit(f, true, g));
    while (f < total) {
      out.push_back(unit(f++, true, g));
      out.push_back(unit(b++, false, g));
    }
    while (b < total) out.push_back(unit(b++, false, g));
  }
}

// ZB-H1 (Qi et al., zero-bubble pipeline parallelism): the backward split into B (the input's
// gradient, which the previous stage waits for) and W (the weights' gradient, which nobody
// waits for). Built by running the clock: a free group runs a ready B first; else a W if S are
// pending (what W needs is held for at most S micro-batches, whatever M); else a ready F if
// fewer than S-s micro-batches await their B (1F1B's activations); else a pending W, which so
// fills what 1F1B leaves idle: the bubble (S-1)/(3M+S-1) with unit F, B and W.
void zeroBubbleH1(PipelineSchedule &s) {
  const int S = s.groups, M = s.microbatches;
  std::vector<std::vector<int64_t>> fDone(S, std::vector<int64_t>(M, -1)), bDone = fDone;
  std::vector<int> f(S, 0), b(S, 0), w(S, 0);
  std::vector<int64_t> freeAt(S, 0);
  int remaining = 3 * S * M;
  for (int64_t t = 0; remaining > 0; ++t) {
    for (int g = 0; g < S; ++g) {
      if (freeAt[(size_t)g] > t) continue;
      auto done = [&](int64_t at) { return at >= 0 && at <= t; };
      Step next;
      if (b[g] < f[g] && done(fDone[g][b[g]]) && (g == S - 1 || done(bDone[g + 1][b[g]]))) {
        next = {Step::B, g, b[g]};
        bDone[g][b[g]++] = t + 1;
      } else if (b[g] - w[g] >= S) {  // W inputs held for at most S micro-batches
        next = {Step::W, g, w[g]++};
      } else if (f[g] < M && (g == 0 || done(fDone[g - 1][f[g]])) && f[g] - b[g] < S - g) {
        next = {Step::F, g, f[g]};
        fDone[g][f[g]++] = t + 1;
      } else if (w[g] < b[g]) {
        next = {Step::W, g, w[g]++};
      } else {
        continue;
      }
      s.steps[(size_t)g].push_back(next);
      freeAt[(size_t)g] = t + 1;
      --remaining;
    }
  }
}

} // namespace

const char *stepKindName(PipelineStep::Kind k) { return k == Step::F ? "F" : k == Step::B ? "B" : "W"; }

std::string stepName(const PipelineStep &s) {
  return std::string(stepKindName(s.kind)) + " s" + std::to_string(s.stage) + " mb" + std::to_string(s.mb);
}

std::string writtenStep(const PipelineStep &s) {
  return std::string(stepKindName(s.kind)) + std::to_string(s.stage) + "." + std::to_string(s.mb);
}

std::string makeSchedule(ir::Schedule kind, int groups, int virtualStages, int microbatches, PipelineSchedule &out) {
  out = PipelineSchedule{};
  out.kind = kind;
  out.groups = groups;
  out.virtualStages = virtualStages;
  out.microbatches = microbatches;
  out.steps.assign((size_t)groups, {});
  for (int v = 0; v < groups * virtualStages; ++v) out.placement.push_back(v % groups);
  switch (kind) {
  case ir::Schedule::GPipe: gpipe(out, true); break;
  case ir::Schedule::Inference: gpipe(out, false); break;
  case ir::Schedule::OneFOneB: oneFOneB(out); break;
  case ir::Schedule::ZeroBubbleH1: zeroBubbleH1(out); break;
  case ir::Schedule::Interleaved:
    if (virtualStages == 1) {
      oneFOneB(out);
    } else {
      if (microbatches % groups != 0)
        return "the interleaved schedule sends micro-batches through the stages in rounds of " +
               std::to_string(groups) + " (the device groups), so it needs microbatches a multiple of " +
               std::to_string(groups);
      interleaved(out);
    }
    break;
  }
  return "";
}

void makePlacedSchedule(ir::Schedule kind, const std::vector<int> &placement, int groups, int microbatches,
                        PipelineSchedule &out) {
  const int S = (int)placement.size();
  PipelineSchedule flat;  // a group per stage
  makeSchedule(kind, S, 1, microbatches, flat);
  PipelineTimeline t;
  std::string dead = simulateSchedule(flat, t);
  if (!dead.empty()) throw InternalError("the " + std::string(ir::scheduleName(kind)) + " schedule deadlocks: " + dead);
  out = PipelineSchedule{};
  out.kind = kind;
  out.groups = groups;
  out.microbatches = microbatches;
  out.placement = placement;
  out.placed = true;
  // Each group's steps by their start in the one-group-per-stage run: a step starts after the
  // steps it needs have finished, so the orders never wait in a circle. (Two steps starting at
  // once need nothing of each other; the later stage's goes first, nearer the loss.)
  std::vector<std::vector<std::pair<std::pair<int64_t, int>, PipelineStep>>> timed((size_t)groups);
  for (int v = 0; v < S; ++v)
    for (size_t i = 0; i < flat.steps[(size_t)v].size(); ++i)
      timed[(size_t)placement[(size_t)v]].push_back({{t.start[(size_t)v][i], -v}, flat.steps[(size_t)v][i]});
  out.steps.assign((size_t)groups, {});
  for (int g = 0; g < groups; ++g) {
    auto &list = timed[(size_t)g];
    std::stable_sort(list.begin(), list.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    for (const auto &x : list) out.steps[(size_t)g].push_back(x.second);
  }
}

std::vector<std::pair<size_t, std::string>> orderTokens(const std::string &text) {
  std::vector<std::pair<size_t, std::string>> out;
  auto separator = [](char c) { return c == ' ' || c == '\t' || c == ','; };
  for (size_t i = 0; i < text.size();) {
    if (separator(text[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && !separator(text[end])) ++end;
    out.push_back({i, text.substr(i, end - i)});
    i = end;
  }
  return out;
}

std::string parseOrder(const std::string &text, int group, PipelineSchedule &s, int &at) {
  std::vector<int> mine;
  for (int v = 0; v < s.stages(); ++v)
    if (s.groupOf(v) == group) mine.push_back(v);
  std::set<std::tuple<int, int, int>> seen;
  auto &out = s.steps[(size_t)group];
  out.clear();
  const std::string g = "device group " + std::to_string(group);
  const std::string shape = "a step is its kind, its stage, '.' and its micro-batch: F1.3";
  for (const auto &[offset, tok] : orderTokens(text)) {
    at = (int)offset;
    auto bad = [&](const std::string &why) { return "step '" + tok + "' in " + g + "'s order: " + why; };
    PipelineStep x;
    const char k = tok[0];
    if (k != 'F' && k != 'B' && k != 'W')
      return bad("a step is F (forward), B (backward) or W (weight gradient), its stage, '.' and its micro-batch: F1.3");
    x.kind = k == 'F' ? PipelineStep::F : k == 'B' ? PipelineStep::B : PipelineStep::W;
    auto number = [&](size_t &j, int &v) {
      if (j >= tok.size() || tok[j] < '0' || tok[j] > '9') return false;
      v = 0;
      for (; j < tok.size() && tok[j] >= '0' && tok[j] <= '9'; ++j)
        if ((v = v * 10 + (tok[j] - '0')) > 1000000) return false;
      return true;
    };
    size_t j = 1;
    int a = 0, b = 0;
    if (!number(j, a)) return bad(shape);
    if (j < tok.size() && tok[j] == '.') {
      ++j;
      if (!number(j, b) || j != tok.size()) return bad(shape);
      x.stage = a, x.mb = b;
    } else if (j != tok.size()) {
      return bad(shape);
    } else if (mine.size() != 1) {
      return bad(g + " holds " + std::to_string(mine.size()) + " stages: name the stage, F" +
                 std::to_string(mine[0]) + "." + std::to_string(a));
    } else {
      x.stage = mine[0], x.mb = a;
    }
    if (x.stage >= s.stages()) return bad("the pipeline has " + std::to_string(s.stages()) + " stages");
    if (s.groupOf(x.stage) != group)
      return bad("stage " + std::to_string(x.stage) + " runs on device group " + std::to_string(s.groupOf(x.stage)));
    if (x.mb >= s.microbatches) return bad("there are " + std::to_string(s.microbatches) + " micro-batches");
    if (s.kind == ir::Schedule::Inference && x.kind != PipelineStep::F)
      return bad("inference runs forward steps (F) only");
    if (x.kind == PipelineStep::W && s.kind != ir::Schedule::ZeroBubbleH1)
      return bad("weight-gradient steps (W) are zb-h1's; the backward step B computes them under " +
                 std::string(ir::scheduleName(s.kind)));
    if (!seen.insert({(int)x.kind, x.stage, x.mb}).second) return bad("it is already in the order");
    out.push_back(x);
  }
  at = -1;
  const PipelineStep::Kind kinds[] = {PipelineStep::F, PipelineStep::B, PipelineStep::W};
  const int nkinds = s.kind == ir::Schedule::Inference ? 1 : s.kind == ir::Schedule::ZeroBubbleH1 ? 3 : 2;
  for (int v : mine)
    for (int q = 0; q < nkinds; ++q)
      for (int m = 0; m < s.microbatches; ++m)
        if (!seen.count({(int)kinds[q], v, m})) {
          return g + "'s order lacks " + writtenStep({kinds[q], v, m}) + " (" + stepName({kinds[q], v, m}) + ")";
        }
  return "";
}

std::string pipelineSchedule(const ir::PipelineFunc &p, PipelineSchedule &out, int &order, int &at) {
  order = at = -1;
  const int G = (int)p.stageAxisSize, M = (int)p.microbatches;
  if (!p.placement.empty()) makePlacedSchedule(p.schedule, p.placement, G, M, out);
  else if (std::string why = makeSchedule(p.schedule, G, (int)p.virtualStages, M, out); !why.empty()) return why;
  if (p.order.empty()) return "";
  out.placed = out.written = true;
  for (int g = 0; g < G; ++g)
    if (std::string why = parseOrder(p.order[(size_t)g], g, out, at); !why.empty()) {
      order = g;
      return why;
    }
  return "";
}

int64_t stepCost(const PipelineSchedule &s, const PipelineStep &step) {
  if (step.kind == Step::F) return 1;
  return s.kind == ir::Schedule::ZeroBubbleH1 ? 1 : 2;
}

double PipelineTimeline::bubble() const {
  size_t groups = start.size();
  return makespan ? 1.0 - (double)busy / ((double)groups * (double)makespan) : 0.0;
}

std::vector<PipelineStep> stepNeeds(const PipelineSchedule &s, const PipelineStep &x) {
  std::vector<Step> deps;
  if (x.kind == Step::F && x.stage > 0) deps.push_back({Step::F, x.stage - 1, x.mb});
  if (x.kind == Step::B) {
    deps.push_back({Step::F, x.stage, x.mb});
    if (x.stage < s.stages() - 1) deps.push_back({Step::B, x.stage + 1, x.mb});
  }
  if (x.kind == Step::W) deps.push_back({Step::B, x.stage, x.mb});
  return deps;
}

namespace {

using StepKey = std::tuple<int, int, int>;  // (kind, stage, micro-batch)
StepKey keyOf(const PipelineStep &x) { return std::make_tuple((int)x.kind, x.stage, x.mb); }

// Runs each group's steps in order, a step starting once its group is free and the steps it
// needs have finished, each taking cost(step) (clock units, or measured seconds). Fills each
// step's finish, how far each group got (`next`: all of its steps unless it is stuck), each
// step's start per group, the work done and the makespan.
template <class T, class Cost>
void runSteps(const PipelineSchedule &s, Cost cost, std::map<StepKey, T> &finish, std::vector<size_t> &next,
              std::vector<std::vector<T>> &start, T &busy, T &makespan) {
  const size_t G = (size_t)s.groups;
  next.assign(G, 0);
  start.assign(G, {});
  std::vector<T> freeAt(G, T(0));
  busy = makespan = T(0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t g = 0; g < G; ++g)
      while (next[g] < s.steps[g].size()) {
        const Step &x = s.steps[g][next[g]];
        T at = freeAt[g];
        bool ready = true;
        for (const Step &d : stepNeeds(s, x)) {
          auto it = finish.find(keyOf(d));
          if (it == finish.end()) ready = false;
          else at = std::max(at, it->second);
        }
        if (!ready) break;
        start[g].push_back(at);
        freeAt[g] = finish[keyOf(x)] = at + cost(x);
        busy += cost(x);
        makespan = std::max(makespan, freeAt[g]);
        ++next[g];
        progress = true;
      }
  }
}

} // namespace

double replaySchedule(const PipelineSchedule &s, const std::function<double(const PipelineStep &)> &seconds) {
  std::map<StepKey, double> finish;
  std::vector<size_t> next;
  std::vector<std::vector<double>> start;
  double busy = 0, makespan = 0;
  runSteps<double>(s, seconds, finish, next, start, busy, makespan);
  for (int g = 0; g < s.groups; ++g)
    if (next[(size_t)g] < s.steps[(size_t)g].size()) return -1;
  return makespan > 0 ? 1.0 - busy / ((double)s.groups * makespan) : 0.0;
}

std::string simulateSchedule(const PipelineSchedule &s, PipelineTimeline &out, std::pair<int, size_t> *stuck) {
  const int G = s.groups;
  std::map<StepKey, int64_t> finish;  // (kind, stage, mb) -> clock
  auto key = keyOf;
  auto needs = [&](const Step &x) { return stepNeeds(s, x); };
  std::vector<size_t> next;
  out = PipelineTimeline{};
  out.held.assign((size_t)G, 0);
  for (int g = 0; g < G; ++g) {
    int now = 0;
    for (const Step &x : s.steps[(size_t)g]) {
      now += x.kind == Step::F && s.kind != ir::Schedule::Inference ? 1 : x.kind == Step::B ? -1 : 0;
      out.held[(size_t)g] = std::max(out.held[(size_t)g], now);
    }
  }
  runSteps<int64_t>(s, [&](const Step &x) { return stepCost(s, x); }, finish, next, out.start, out.busy,
                    out.makespan);
  // Stuck groups: each waits for a step of another group; follow the waits to a cycle.
  auto name = [&](const Step &x) { return s.written ? writtenStep(x) : stepName(x); };
  auto groupOf = [&](const Step &x) { return s.groupOf(x.stage); };
  auto waitsFor = [&](int g, Step &blocked, Step &dep) {  // (a stuck group's next step and what it lacks)
    blocked = s.steps[(size_t)g][next[(size_t)g]];
    for (const Step &d : needs(blocked))
      if (!finish.count(key(d))) {
        dep = d;
        return;
      }
  };
  for (int g = 0; g < G; ++g) {
    if (next[(size_t)g] == s.steps[(size_t)g].size()) continue;
    // Follow the waits from g until a group repeats (the cycle) or one has nothing left to run.
    std::vector<int> seen;
    int a = g;
    Step blockedA, depA;
    while (std::find(seen.begin(), seen.end(), a) == seen.end()) {
      seen.push_back(a);
      waitsFor(a, blockedA, depA);
      int b = groupOf(depA);
      if (next[(size_t)b] == s.steps[(size_t)b].size()) {
        if (stuck) *stuck = {a, next[(size_t)a]};
        return "device group " + std::to_string(a) + " waits in " + name(blockedA) + " for " + name(depA) +
               ", which device group " + std::to_string(b) + " never runs";
      }
      a = b;
    }
    waitsFor(a, blockedA, depA);  // a is on the cycle: it and the group it waits for
    if (stuck) *stuck = {a, next[(size_t)a]};
    const int b = groupOf(depA);
    Step blockedB, depB;
    waitsFor(b, blockedB, depB);
    return "device group " + std::to_string(a) + " waits in " + name(blockedA) + " for " + name(depA) +
           ", which device group " + std::to_string(b) + " runs only after " + name(blockedB) +
           (b == a ? "" : ", which waits for " + name(depB)) + ": neither can go on";
  }
  return "";
}

double theoreticalBubble(const PipelineSchedule &s) {
  const double S = s.groups, M = s.microbatches, V = s.virtualStages;
  switch (s.kind) {
  case ir::Schedule::ZeroBubbleH1: return (S - 1) / (3 * M + S - 1);
  case ir::Schedule::Interleaved: return (S - 1) / (V * M + S - 1);
  default: return (S - 1) / (M + S - 1);
  }
}

namespace {

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * f);
  return buf;
}

std::string bytes(int64_t b) {
  char buf[32];
  if (b < 10240) std::snprintf(buf, sizeof buf, "%lld B", (long long)b);
  else if (b < 10 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", (double)b / 1024);
  else std::snprintf(buf, sizeof buf, "%.1f MiB", (double)b / (1024 * 1024));
  return buf;
}

std::string header(const ir::Module &m, const ir::PipelineFunc &p) {
  std::string where;  // mesh m's axis "stage" / meshes big (4 devices), small (2 devices)
  if (p.groupMeshes.empty()) {
    const ir::Mesh &mesh = *m.meshes[(size_t)p.mesh];
    where = "mesh " + mesh.name + "'s axis \"" + mesh.axes[(size_t)p.stageAxis] + "\"";
  } else {
    where = "meshes";
    for (size_t g = 0; g < p.groupMeshes.size(); ++g) {
      const ir::Mesh &mesh = *m.meshes[(size_t)p.groupMeshes[g]];
      where += (g ? ", " : " ") + mesh.name + " (" + std::to_string(mesh.numDevices()) + " device" +
               (mesh.numDevices() == 1 ? "" : "s") + ")";
    }
  }
  std::string placed;
  if (!p.placement.empty()) {
    placed = ", placed";
    for (size_t k = 0; k < p.placement.size(); ++k) placed += (k ? ", " : " ") + std::to_string(p.placement[k]);
  }
  return "pipeline " + p.name + ": schedule " + ir::scheduleName(p.schedule) + (p.order.empty() ? "" : " (order given)") +
         ", " + std::to_string(p.numStages()) + " stages on " + std::to_string(p.stageAxisSize) +
         " device groups (" + where +
         (p.virtualStages > 1 ? ", " + std::to_string(p.virtualStages) + " virtual stages each" : "") + placed + "), " +
         std::to_string(p.microbatches) + " micro-batches\n";
}

} // namespace

std::string printSchedules(const ir::Module &m) {
  std::string out;
  for (const ir::PipelineFunc &p : m.pipelines) {
    PipelineSchedule s;
    int order = -1, at = -1;
    std::string why = pipelineSchedule(p, s, order, at);
    out += header(m, p);
    if (!why.empty()) {
      out += "  no schedule: " + why + "\n";
      continue;
    }
    PipelineTimeline t;
    std::string dead = simulateSchedule(s, t);
    if (!dead.empty()) {
      out += "  deadlock: " + dead + "\n";
      continue;
    }
    out += std::string("  clock units: F 1, ") +
           (s.kind == ir::Schedule::ZeroBubbleH1 ? "B 1 (input gradient), W 1 (weight gradient)"
            : s.kind == ir::Schedule::Inference  ? "no backward"
                                                 : "B 2") +
           "; a cell is a step's stage and micro-batch, '.' idle\n";
    // The grid: a row per device group, a column per clock unit.
    std::vector<std::vector<std::string>> grid((size_t)s.groups, std::vector<std::string>((size_t)t.makespan, "."));
    size_t width = 1;
    for (int g = 0; g < s.groups; ++g)
      for (size_t i = 0; i < s.steps[(size_t)g].size(); ++i) {
        const PipelineStep &x = s.steps[(size_t)g][i];
        std::string cell = std::string(stepKindName(x.kind)) +
                           (s.stages() > s.groups ? std::to_string(x.stage) + "." : "") + std::to_string(x.mb);
        for (int64_t c = 0; c < stepCost(s, x); ++c) grid[(size_t)g][(size_t)(t.start[(size_t)g][i] + c)] = cell;
        width = std::max(width, cell.size());
      }
    for (int g = 0; g < s.groups; ++g) {
      std::string row = "  group " + std::to_string(g) + " |";
      for (const std::string &cell : grid[(size_t)g]) row += " " + cell + std::string(width - cell.size(), ' ');
      while (!row.empty() && row.back() == ' ') row.pop_back();
      out += row + "\n";
    }
    // (a group holding several stages holds a micro-batch's activations per stage it has run
    // forward on it and not yet backward: counted per stage)
    const bool perStage = s.stages() > s.groups;
    out += "  activations held at once:";
    for (int g = 0; g < s.groups; ++g)
      out += std::string(g ? "," : "") + " group " + std::to_string(g) + " " + std::to_string(t.held[(size_t)g]) +
             (perStage ? " stage micro-batch" : " micro-batch") + (t.held[(size_t)g] == 1 ? "" : "es");
    out += "\n";
    out += "  " + std::to_string(t.makespan) + " clock units; predicted bubble " + percent(t.bubble()) +
           " of the devices' time";
    if (s.placed)  // (no textbook formula: the stages are where placement= or order= put them)
      out += "\n";
    else
      out += std::string(" (") +
             (s.kind == ir::Schedule::ZeroBubbleH1   ? "(S-1)/(3M+S-1)"
              : s.kind == ir::Schedule::Interleaved ? "(S-1)/(VM+S-1)"
                                                     : "(S-1)/(M+S-1)") +
             " = " + percent(theoreticalBubble(s)) + ")\n";
  }
  return out;
}

std::string printStages(const ir::Module &m, const std::map<const ir::Func *, PlannedMemory> *planned) {
  std::string out;
  // Each pipeline's equation (its stage programs), found by its label ("step (1f1b, ...)").
  auto runOf = [&](const std::string &name) -> const ir::Eqn * {
    for (const auto &f : m.funcs)
      for (const ir::Eqn &e : f->eqns)
        if (e.prim == ir::Prim::Pipeline && e.strParam("label").rfind(name + " (", 0) == 0) return &e;
    return nullptr;
  };
  for (const ir::PipelineFunc &p : m.pipelines) {
    out += header(m, p);
    if (p.submesh >= 0) {  // "  each stage's shmaps on its slice m/stage (data=2, model=2)"
      const ir::Mesh &sub = *m.meshes[(size_t)p.submesh];
      std::string axes;
      for (size_t a = 0; a < sub.axes.size(); ++a)
        axes += (a ? ", " : "") + sub.axes[a] + "=" + std::to_string(sub.sizes[a]);
      out += "  each stage's shmaps on its device group's slice " + sub.name + " (" + axes + ")\n";
    }
    for (size_t k = 0; k < p.stages.size(); ++k) {
      const ir::PipelineStage &st = p.stages[k];
      const size_t group = p.placement.empty() ? k % (size_t)p.stageAxisSize : (size_t)p.placement[k];
      out += "  stage " + std::to_string(k) + " (device group " + std::to_string(group) +
             (p.groupMeshes.empty() ? "" : ", mesh " + m.meshes[(size_t)p.groupMeshes[group]]->name) +
             "): " + std::to_string(st.eqns) + " equations, " + std::to_string(st.flops) +
             " FLOPs per micro-batch forward; parameters " + bytes(st.paramBytes);
      std::string names;
      for (const std::string &n : st.params) names += (names.empty() ? "" : ", ") + n;
      out += names.empty() ? "" : " (" + names + ")";
      out += "; sends " + bytes(st.sendBytes) + " of activations per micro-batch\n";
    }
    if (const ir::Eqn *run = planned ? runOf(p.name) : nullptr) {
      // The stage programs' host values (micro-batch slices, activations and residuals between a
      // forward step and its backward, received messages, gradient sums) share one arena each,
      // allocated once per run: its size is the most they hold at once, whatever the steps. The
      // stage shmaps' results kept on the devices (the blocks form) share a second one, sized
      // at run time (a rank's blocks), slot by slot as the first is.
      const ir::Eqn &e = *run;
      for (size_t g = 0; g < e.bodies.size(); ++g) {
        auto it = planned->find(e.bodies[g]);
        if (it == planned->end()) continue;
        const PlannedMemory &mem = it->second;
        const int allocations = (mem.arena > 0) + mem.hasBlocks;
        out += "  device group " + std::to_string(g) + "'s stage program: " + std::to_string(mem.arena + mem.blocks) +
               " bytes of host memory planned, " + std::to_string(allocations) + " allocation" +
               (allocations == 1 ? "" : "s") + " a run: " + std::to_string(mem.arena) +
               " for activations, residuals, messages and gradient sums";
        if (mem.hasBlocks)
          out += ", " + std::to_string(mem.blocks) +
                 " for the stage shmaps' results kept as the devices' blocks (under MPI, a rank's blocks only)";
        out += "\n";
      }
    }
  }
  return out;
}

} // namespace shmapc::passes
