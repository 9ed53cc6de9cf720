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

std::string stepName(const PipelineStep &s) {
  const char *k = s.kind == Step::F ? "F" : s.kind == Step::B ? "B" : "W";
  return std::string(k) + " s" + std::to_string(s.stage) + " mb" + std::to_string(s.mb);
}

std::string makeSchedule(ir::Schedule kind, int groups, int virtualStages, int microbatches, PipelineSchedule &out) {
  out = PipelineSchedule{};
  out.kind = kind;
  out.groups = groups;
  out.virtualStages = virtualStages;
  out.microbatches = microbatches;
  out.steps.assign((size_t)groups, {});
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

double replaySchedule(const PipelineSchedule &s, const std::function<double(const PipelineStep &)> &seconds) {
  const int G = s.groups;
  std::map<std::tuple<int, int, int>, double> finish;
  auto key = [](const Step &x) { return std::make_tuple((int)x.kind, x.stage, x.mb); };
  std::vector<size_t> next((size_t)G, 0);
  std::vector<double> freeAt((size_t)G, 0);
  double busy = 0, makespan = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int g = 0; g < G; ++g)
      while (next[(size_t)g] < s.steps[(size_t)g].size()) {
        const Step &x = s.steps[(size_t)g][next[(size_t)g]];
        double at = freeAt[(size_t)g];
        bool ready = true;
        for (const Step &d : stepNeeds(s, x)) {
          auto it = finish.find(key(d));
          if (it == finish.end()) ready = false;
          else at = std::max(at, it->second);
        }
        if (!ready) break;
        freeAt[(size_t)g] = finish[key(x)] = at + seconds(x);
        busy += seconds(x);
        makespan = std::max(makespan, freeAt[(size_t)g]);
        ++next[(size_t)g];
        progress = true;
      }
  }
  for (int g = 0; g < G; ++g)
    if (next[(size_t)g] < s.steps[(size_t)g].size()) return -1;
  return makespan > 0 ? 1.0 - busy / ((double)G * makespan) : 0.0;
}

std::string simulateSchedule(const PipelineSchedule &s, PipelineTimeline &out) {
  const int G = s.groups;
  std::map<std::tuple<int, int, int>, int64_t> finish;  // (kind, stage, mb) -> clock
  auto key = [](const Step &x) { return std::make_tuple((int)x.kind, x.stage, x.mb); };
  auto needs = [&](const Step &x) { return stepNeeds(s, x); };
  std::vector<size_t> next((size_t)G, 0);
  std::vector<int64_t> freeAt((size_t)G, 0);
  out = PipelineTimeline{};
  out.start.assign((size_t)G, {});
  out.held.assign((size_t)G, 0);
  for (int g = 0; g < G; ++g) {
    int now = 0;
    for (const Step &x : s.steps[(size_t)g]) {
      now += x.kind == Step::F && s.kind != ir::Schedule::Inference ? 1 : x.kind == Step::B ? -1 : 0;
      out.held[(size_t)g] = std::max(out.held[(size_t)g], now);
    }
  }
  for (bool progress = true; progress;) {
    progress = false;
    for (int g = 0; g < G; ++g)
      while (next[(size_t)g] < s.steps[(size_t)g].size()) {
        const Step &x = s.steps[(size_t)g][next[(size_t)g]];
        int64_t at = freeAt[(size_t)g];
        bool ready = true;
        for (const Step &d : needs(x)) {
          auto it = finish.find(key(d));
          if (it == finish.end()) ready = false;
          else at = std::max(at, it->second);
        }
        if (!ready) break;
        out.start[(size_t)g].push_back(at);
        freeAt[(size_t)g] = at + stepCost(s, x);
        finish[key(x)] = freeAt[(size_t)g];
        out.busy += stepCost(s, x);
        out.makespan = std::max(out.makespan, freeAt[(size_t)g]);
        ++next[(size_t)g];
        progress = true;
      }
  }
  // Stuck groups: each waits for a step of another group; follow the waits to a cycle.
  auto groupOf = [&](const Step &x) { return x.stage % G; };
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
      if (next[(size_t)b] == s.steps[(size_t)b].size())
        return "device group " + std::to_string(a) + " waits in " + stepName(blockedA) + " for " + stepName(depA) +
               ", which device group " + std::to_string(b) + " never runs";
      a = b;
    }
    waitsFor(a, blockedA, depA);  // a is on the cycle: it and the group it waits for
    const int b = groupOf(depA);
    Step blockedB, depB;
    waitsFor(b, blockedB, depB);
    return "device group " + std::to_string(a) + " waits in " + stepName(blockedA) + " for " + stepName(depA) +
           ", which device group " + std::to_string(b) + " runs only after " + stepName(blockedB) +
           (b == a ? "" : ", which waits for " + stepName(depB)) + ": neither can go on";
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
  const ir::Mesh &mesh = *m.meshes[(size_t)p.mesh];
  return "pipeline " + p.name + ": schedule " + ir::scheduleName(p.schedule) + ", " + std::to_string(p.numStages()) +
         " stages on " + std::to_string(p.stageAxisSize) + " device groups (mesh " + mesh.name + "'s axis \"" +
         mesh.axes[(size_t)p.stageAxis] + "\"" +
         (p.virtualStages > 1 ? ", " + std::to_string(p.virtualStages) + " virtual stages each" : "") + "), " +
         std::to_string(p.microbatches) + " micro-batches\n";
}

} // namespace

std::string printSchedules(const ir::Module &m) {
  std::string out;
  for (const ir::PipelineFunc &p : m.pipelines) {
    PipelineSchedule s;
    std::string why = makeSchedule(p.schedule, (int)p.stageAxisSize, (int)p.virtualStages, (int)p.microbatches, s);
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
        std::string cell = std::string(x.kind == PipelineStep::F ? "F" : x.kind == PipelineStep::B ? "B" : "W") +
                           (s.virtualStages > 1 ? std::to_string(x.stage) + "." : "") + std::to_string(x.mb);
        for (int64_t c = 0; c < stepCost(s, x); ++c) grid[(size_t)g][(size_t)(t.start[(size_t)g][i] + c)] = cell;
        width = std::max(width, cell.size());
      }
    for (int g = 0; g < s.groups; ++g) {
      std::string row = "  group " + std::to_string(g) + " |";
      for (const std::string &cell : grid[(size_t)g]) row += " " + cell + std::string(width - cell.size(), ' ');
      while (!row.empty() && row.back() == ' ') row.pop_back();
      out += row + "\n";
    }
    out += "  activations held at once:";
    for (int g = 0; g < s.groups; ++g)
      out += std::string(g ? "," : "") + " group " + std::to_string(g) + " " + std::to_string(t.held[(size_t)g]) +
             " micro-batch" + (t.held[(size_t)g] == 1 ? "" : "es");
    out += "\n";
    out += "  " + std::to_string(t.makespan) + " clock units; predicted bubble " + percent(t.bubble()) +
           " of the devices' time (" +
           (s.kind == ir::Schedule::ZeroBubbleH1   ? "(S-1)/(3M+S-1)"
            : s.kind == ir::Schedule::Interleaved ? "(S-1)/(VM+S-1)"
                                                   : "(S-1)/(M+S-1)") +
           " = " + percent(theoreticalBubble(s)) + ")\n";
  }
  return out;
}

std::string printStages(const ir::Module &m) {
  std::string out;
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
      out += "  stage " + std::to_string(k) + " (device group " + std::to_string(k % (size_t)p.stageAxisSize) +
             "): " + std::to_string(st.eqns) + " equations, " + std::to_string(st.flops) +
             " FLOPs per micro-batch forward; parameters " + bytes(st.paramBytes);
      std::string names;
      for (const std::string &n : st.params) names += (names.empty() ? "" : ", ") + n;
      out += names.empty() ? "" : " (" + names + ")";
      out += "; sends " + bytes(st.sendBytes) + " of activations per micro-batch\n";
    }
  }
  return out;
}

} // namespace shmapc::passes
