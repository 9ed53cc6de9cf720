// Pipeline schedules: every schedule of random sizes runs to the end (no deadlock: the fuzz),
// each device group runs every step of its stages once, in an order the stages' data flow
// allows, and the predicted bubble is the textbook one; a hand-made order that deadlocks is
// reported naming the two steps that wait for each other.
#include "passes/pipeline/Schedule.h"

#include <catch2/catch.hpp>

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
      REQUIRE(x.stage % s.groups == g);
      REQUIRE(seen.insert({(int)x.kind, x.stage, x.mb}).second);
    }
  const size_t kinds = s.kind == ir::Schedule::Inference ? 1 : s.kind == ir::Schedule::ZeroBubbleH1 ? 3 : 2;
  REQUIRE(seen.size() == kinds * (size_t)s.stages() * (size_t)s.microbatches);
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
  using K = PipelineStep;
  s.steps = {{{K::F, 0, 0}, {K::B, 0, 0}, {K::F, 0, 1}, {K::B, 0, 1}},
             {{K::F, 1, 0}, {K::F, 1, 1}, {K::B, 1, 0}, {K::B, 1, 1}}};
  PipelineTimeline t;
  std::string why = simulateSchedule(s, t);
  REQUIRE_THAT(why, Catch::Contains("B s0 mb0") && Catch::Contains("B s1 mb0") && Catch::Contains("F s1 mb1"));
}
