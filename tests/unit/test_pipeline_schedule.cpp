// Pipeline schedules: every schedule of random sizes and placements runs to the end (no
// deadlock: the fuzz), each device group runs every step of its stages once, in an order the
// stages' data flow allows, and the predicted bubble is the textbook one; a hand-made order that
// deadlocks is reported naming the two steps that wait for each other, and random hand-made
// orders are refused exactly when their waits form a cycle (an independent check: the orders
// and the data flow as one graph, sorted topologically).
#include "passes/pipeline/Schedule.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

using namespace shmapc;
using namespace shmapc::passes;

namespace {

// Every (kind, stage, micro-batch) exactly once, on the stage's group.
void checkComplete(const PipelineSchedule &s) {
  std::set<std::tuple<int, int, int>> seen;
  for (int g = 0; g < s.groups; ++g)
    for (const PipelineStep &x : s.steps[(size_t)g]) {
      REQUIRE(s.groupOf(x.stage) == g);
      REQUIRE(seen.insert({(int)x.kind, x.stage, x.mb}).second);
    }
  const size_t kinds = s.kind == ir::Schedule::Inference ? 1 : s.kind == ir::Schedule::ZeroBubbleH1 ? 3 : 2;
  REQUIRE(seen.size() == kinds * (size_t)s.stages() * (size_t)s.microbatches);
}

// Whether the orders can all run to the end: Kahn's algorithm on the graph whose edges are each
// group's consecutive steps and each step's needs (a cycle: some steps never become ready).
bool acyclic(const PipelineSchedule &s) {
  std::map<std::tuple<int, int, int>, int> id;
  std::vector<PipelineStep> all;
  for (const auto &list : s.steps)
    for (const PipelineStep &x : list) {
      id[{(int)x.kind, x.stage, x.mb}] = (int)all.size();
      all.push_back(x);
    }
  std::vector<std::vector<int>> out(all.size());
  std::vector<int> indegree(all.size(), 0);
  auto edge = [&](int a, int b) {
    out[(size_t)a].push_back(b);
    ++indegree[(size_t)b];
  };
  for (const auto &list : s.steps)
    for (size_t i = 1; i < list.size(); ++i)
      edge(id.at({(int)list[i - 1].kind, list[i - 1].stage, list[i - 1].mb}),
           id.at({(int)list[i].kind, list[i].stage, list[i].mb}));
  for (size_t b = 0; b < all.size(); ++b)
    for (const PipelineStep &d : stepNeeds(s, all[b])) edge(id.at({(int)d.kind, d.stage, d.mb}), (int)b);
  std::vector<int> ready;
  for (size_t b = 0; b < all.size(); ++b)
    if (!indegree[b]) ready.push_back((int)b);
  size_t done = 0;
  while (!ready.empty()) {
    int a = ready.back();
    ready.pop_back();
    ++done;
    for (int b : out[(size_t)a])
      if (--indegree[(size_t)b] == 0) ready.push_back(b);
  }
  return done == all.size();
}

// A random placement of `stages` stages on `groups` groups, every group holding one.
std::vector<int> randomPlacement(std::mt19937 &rng, int groups, int stages) {
  std::vector<int> p;
  for (int g = 0; g < groups; ++g) p.push_back(g);
  while ((int)p.size() < stages) p.push_back((int)(rng() % (unsigned)groups));
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

} // namespace

TEST_CASE("schedules of random sizes never deadlock and reach the textbook bubble", "[pipeline]") {
  std::mt19937 rng(20261127);
  const ir::Schedule kinds[] = {ir::Schedule::GPipe, ir::Schedule::OneFOneB, ir::Schedule::Interleaved,
                                ir::Schedule::ZeroBubbleH1, ir::Schedule::Inference};
  for (int trial = 0; trial < 400; ++trial) {
    ir::Schedule kind = kinds[rng() % 5];
    int groups = 1 + (int)(rng() % 8), virt = kind == ir::Schedule::Interleaved ? 1 + (int)(rng() % 4) : 1;
    int mb = 1 + (int)(rng() % 24);
    if (kind == ir::Schedule::Interleaved && virt > 1) mb = groups * (1 + (int)(rng() % 6));
    INFO(ir::scheduleName(kind) << " groups " << groups << " virtual " << virt << " micro-batches " << mb);
    PipelineSchedule s;
    REQUIRE(makeSchedule(kind, groups, virt, mb, s).empty());
    checkComplete(s);
    PipelineTimeline t;
    REQUIRE(simulateSchedule(s, t) == "");
    if (kind == ir::Schedule::ZeroBubbleH1 && mb < groups)  // (the formula counts on M >= S)
      REQUIRE(t.bubble() <= (groups - 1.0) / (mb + groups - 1.0) + 1e-12);
    else
      REQUIRE(t.bubble() == Approx(theoreticalBubble(s)).margin(1e-12));
    // 1F1B's point: no group holds more than S-s micro-batches' activations (GPipe holds M).
    if (kind == ir::Schedule::OneFOneB || kind == ir::Schedule::ZeroBubbleH1)
      for (int g = 0; g < groups; ++g) REQUIRE(t.held[(size_t)g] <= std::min(groups - g, mb));
    if (kind == ir::Schedule::GPipe)
      for (int g = 0; g < groups; ++g) REQUIRE(t.held[(size_t)g] == mb);
  }
}

TEST_CASE("the interleaved schedule needs the micro-batches in rounds of the device groups", "[pipeline]") {
  PipelineSchedule s;
  REQUIRE_THAT(makeSchedule(ir::Schedule::Interleaved, 4, 2, 6, s), Catch::Contains("a multiple of 4"));
}

TEST_CASE("a deadlocking order is refused naming two steps", "[pipeline]") {
  // Group 0 runs B s0 mb0 before F s0 mb1; group 1 runs F s1 mb1 before B s1 mb0: B s0 mb0 waits
  // for B s1 mb0, which group 1 runs only after F s1 mb1, which waits for F s0 mb1.
  PipelineSchedule s;
  s.kind = ir::Schedule::GPipe;
  s.groups = 2;
  s.microbatches = 2;
  s.placement = {0, 1};
  using K = PipelineStep;
  s.steps = {{{K::F, 0, 0}, {K::B, 0, 0}, {K::F, 0, 1}, {K::B, 0, 1}},
             {{K::F, 1, 0}, {K::F, 1, 1}, {K::B, 1, 0}, {K::B, 1, 1}}};
  PipelineTimeline t;
  std::string why = simulateSchedule(s, t);
  REQUIRE_THAT(why, Catch::Contains("B s0 mb0") && Catch::Contains("B s1 mb0") && Catch::Contains("F s1 mb1"));
}

TEST_CASE("schedules of random placements never deadlock and keep each group's steps", "[pipeline]") {
  std::mt19937 rng(20261128);
  const ir::Schedule kinds[] = {ir::Schedule::GPipe, ir::Schedule::OneFOneB, ir::Schedule::ZeroBubbleH1,
                                ir::Schedule::Inference};
  for (int trial = 0; trial < 400; ++trial) {
    ir::Schedule kind = kinds[rng() % 4];
    const int groups = 1 + (int)(rng() % 6), stages = groups + (int)(rng() % 6), mb = 1 + (int)(rng() % 12);
    const std::vector<int> placement = randomPlacement(rng, groups, stages);
    std::string where;
    for (int g : placement) where += " " + std::to_string(g);
    INFO(ir::scheduleName(kind) << " groups " << groups << " micro-batches " << mb << " placement" << where);
    PipelineSchedule s;
    makePlacedSchedule(kind, placement, groups, mb, s);
    REQUIRE(s.stages() == stages);
    checkComplete(s);
    PipelineTimeline t;
    REQUIRE(simulateSchedule(s, t) == "");
    REQUIRE(acyclic(s));
    // A group holding one stage each is the schedule itself, up to the groups' names.
    if (stages == groups) {
      PipelineSchedule plain;
      REQUIRE(makeSchedule(kind, groups, 1, mb, plain).empty());
      for (int v = 0; v < stages; ++v)
        REQUIRE(s.steps[(size_t)placement[(size_t)v]] == plain.steps[(size_t)v]);
    }
  }
}

TEST_CASE("random hand-written orders are refused exactly when they deadlock", "[pipeline]") {
  std::mt19937 rng(20261129);
  const ir::Schedule kinds[] = {ir::Schedule::GPipe, ir::Schedule::ZeroBubbleH1, ir::Schedule::Inference};
  int refused = 0, ran = 0;
  for (int trial = 0; trial < 600; ++trial) {
    ir::Schedule kind = kinds[rng() % 3];
    const int groups = 1 + (int)(rng() % 4), stages = groups + (int)(rng() % 3), mb = 1 + (int)(rng() % 4);
    PipelineSchedule s;
    makePlacedSchedule(kind, randomPlacement(rng, groups, stages), groups, mb, s);
    // Each group's steps shuffled a little: a few random swaps of neighbours.
    for (auto &list : s.steps)
      for (int k = (int)(rng() % 4); k-- > 0 && list.size() > 1;) {
        size_t i = rng() % (list.size() - 1);
        std::swap(list[i], list[i + 1]);
      }
    // Written out and read back through the order= parser.
    std::vector<std::string> text;
    for (const auto &list : s.steps) {
      std::string t;
      for (const PipelineStep &x : list) t += (t.empty() ? "" : " ") + writtenStep(x);
      text.push_back(t);
    }
    PipelineSchedule read = s;
    for (int g = 0; g < groups; ++g) {
      int at = 0;
      REQUIRE(parseOrder(text[(size_t)g], g, read, at) == "");
      REQUIRE(read.steps[(size_t)g] == s.steps[(size_t)g]);
    }
    PipelineTimeline t;
    std::pair<int, size_t> stuck{-1, 0};
    const std::string dead = simulateSchedule(s, t, &stuck);
    INFO(dead);
    REQUIRE(dead.empty() == acyclic(s));
    if (dead.empty()) {
      ++ran;
    } else {
      ++refused;
      REQUIRE(stuck.first >= 0);
      REQUIRE(stuck.second < s.steps[(size_t)stuck.first].size());
      REQUIRE_THAT(dead, Catch::Contains(stepName(s.steps[(size_t)stuck.first][stuck.second])));
    }
  }
  REQUIRE(refused > 50);  // (both outcomes occur)
  REQUIRE(ran > 50);
}

TEST_CASE("an order names every step of its group once", "[pipeline]") {
  PipelineSchedule s;
  makePlacedSchedule(ir::Schedule::OneFOneB, {0, 1, 0}, 2, 2, s);
  int at = -1;
  REQUIRE_THAT(parseOrder("F0.0 F0.1 F2.0 B2.0 F2.1 B2.1 B0.0", 0, s, at), Catch::Contains("lacks B0.1"));
  REQUIRE(at == -1);
  REQUIRE_THAT(parseOrder("F0.0 F0.0", 0, s, at), Catch::Contains("already in the order"));
  REQUIRE(at == 5);
  REQUIRE_THAT(parseOrder("F1.0", 0, s, at), Catch::Contains("stage 1 runs on device group 1"));
  REQUIRE_THAT(parseOrder("F0.2", 0, s, at), Catch::Contains("2 micro-batches"));
  REQUIRE_THAT(parseOrder("W0.0", 0, s, at), Catch::Contains("zb-h1"));
  REQUIRE_THAT(parseOrder("F0", 0, s, at), Catch::Contains("holds 2 stages"));
  REQUIRE_THAT(parseOrder("X0.0", 0, s, at), Catch::Contains("a step is F"));
  REQUIRE_THAT(parseOrder("F0.", 0, s, at), Catch::Contains("F1.3"));
  REQUIRE(parseOrder("F0 F1 B0 B1", 1, s, at) == "");  // one stage: its micro-batch alone
  REQUIRE(s.steps[1][2] == PipelineStep{PipelineStep::B, 1, 0});
}
