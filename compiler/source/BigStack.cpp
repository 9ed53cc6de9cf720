#include "source/BigStack.h"

#include <cstdio>
#include <exception>
#include <new>
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

// An exception must not leave the thread (it would end the process with SIGABRT): the
// callers turn theirs into messages, and this is the last resort for any they did not.
void *runJob(void *arg) {
  Job *job = static_cast<Job *>(arg);
  try {
    job->result = (*job->fn)();
  } catch (const std::bad_alloc &) {
    std::fputs("shmapc: out of memory\n", stderr);
    job->result = 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "shmapc: internal error: %s\n", e.what());
    job->result = 2;
  } catch (...) {
    std::fputs("shmapc: internal error: an unknown exception\n", stderr);
    job->result = 2;
  }
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
