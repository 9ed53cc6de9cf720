#include "source/BigStack.h"

#include <pthread.h>

namespace shmapc {

namespace {

// 256 calls x 256 nested expressions take about 130 MB in a release build; sanitizers make
// frames several times larger.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr size_t kBigStackBytes = size_t(4) << 30;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr size_t kBigStackBytes = size_t(4) << 30;
#else
constexpr size_t kBigStackBytes = size_t(1) << 30;
#endif
#else
constexpr size_t kBigStackBytes = size_t(1) << 30;
#endif

struct Job {
  const std::function<int()> *fn;
  int result = 0;
};

void *runJob(void *arg) {
  Job *job = static_cast<Job *>(arg);
  job->result = (*job->fn)();
  return nullptr;
}

} // namespace

int runWithBigStack(const std::function<int()> &fn) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return fn();
  Job job{&fn};
  pthread_t thread;
  bool started = pthread_attr_setstacksize(&attr, kBigStackBytes) == 0 &&
                 pthread_create(&thread, &attr, runJob, &job) == 0;
  pthread_attr_destroy(&attr);
  if (!started) return fn();
  pthread_join(thread, nullptr);
  return job.result;
}

} // namespace shmapc
