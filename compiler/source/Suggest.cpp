#include "source/Suggest.h"

#include <algorithm>

namespace shmapc {

size_t editDistanceWithin(const std::string &a, const std::string &b, size_t limit) {
  const size_t far = limit + 1;
  if (std::max(a.size(), b.size()) - std::min(a.size(), b.size()) > limit) return far;
  // Rows of the usual dynamic programme, filled only where |i - j| <= limit; cells outside
  // the band count as `far`, which is all a distance above the limit needs to be.
  std::vector<size_t> prev(b.size() + 1, far), cur(b.size() + 1, far);
  for (size_t j = 0; j <= std::min(b.size(), limit); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    const size_t lo = i > limit ? i - limit : 0, hi = std::min(b.size(), i + limit);
    if (lo > 0) cur[lo - 1] = far;  // may hold a value from two rows ago
    size_t rowMin = far;
    for (size_t j = lo; j <= hi; ++j) {
      size_t d = j == 0 ? i
                        : std::min({prev[j] + 1, cur[j - 1] + 1,
                                    prev[j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
      cur[j] = std::min(d, far);
      rowMin = std::min(rowMin, cur[j]);
    }
    if (rowMin == far) return far;  // every path already costs too much
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closestName(const std::string &name, const std::vector<std::string> &cands) {
  const size_t limit = 2;
  if (name.size() > kMaxSuggestLength) return "";
  std::string best;
  size_t bestD = limit + 1;
  for (const std::string &c : cands) {
    if (c.size() > kMaxSuggestLength) continue;
    size_t d = editDistanceWithin(name, c, limit);
    if (d < bestD && d < name.size()) {
      bestD = d;
      best = c;
    }
  }
  return best;
}

} // namespace shmapc
