// Replays a pipeline schedule with measured step durations (bench/pipeline/run.py): the
// schedule's own step lists (the compiler's, passes/pipeline/Schedule.cpp), each step taking the
// seconds measured for its kind on a stage like it, for more stages than the machine runs.
//
//   shmap_pipeline_replay SCHEDULE GROUPS MICROBATCHES F0 B0 [F1 B1 ...]
//
// Stage s takes the durations of measured stage s % (the pairs given): F (forward) and B
// (backward; under zb-h1 half of it is B, the input's gradient, half W, the weights'). Prints
// the replayed bubble and the textbook one, in percent.
#include "passes/pipeline/Schedule.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  using namespace shmapc;
  if (argc < 6 || (argc - 4) % 2 != 0) {
    std::fprintf(stderr, "usage: %s SCHEDULE GROUPS MICROBATCHES F0 B0 [F1 B1 ...]\n", argv[0]);
    return 2;
  }
  ir::Schedule kind;
  if (!ir::scheduleFromName(argv[1], kind)) {
    std::fprintf(stderr, "%s: unknown schedule %s\n", argv[0], argv[1]);
    return 2;
  }
  const int groups = std::atoi(argv[2]), microbatches = std::atoi(argv[3]);
  if (groups < 1 || microbatches < 1) {
    std::fprintf(stderr, "%s: GROUPS and MICROBATCHES must be positive\n", argv[0]);
    return 2;
  }
  std::vector<double> f, b;
  for (int i = 4; i + 1 < argc; i += 2) {
    f.push_back(std::atof(argv[i]));
    b.push_back(std::atof(argv[i + 1]));
  }
  passes::PipelineSchedule s;
  std::string why = passes::makeSchedule(kind, groups, 1, microbatches, s);
  if (!why.empty()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], why.c_str());
    return 2;
  }
  const bool split = kind == ir::Schedule::ZeroBubbleH1;
  const double bubble = passes::replaySchedule(s, [&](const passes::PipelineStep &x) {
    const size_t k = (size_t)x.stage % f.size();
    return x.kind == passes::PipelineStep::F ? f[k] : split ? b[k] / 2 : b[k];
  });
  if (bubble < 0) {
    std::fprintf(stderr, "%s: the schedule deadlocks\n", argv[0]);
    return 1;
  }
  std::printf("replayed bubble %.2f%%, textbook %.2f%%\n", 100 * bubble, 100 * passes::theoreticalBubble(s));
  return 0;
}
