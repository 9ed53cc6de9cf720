// "Did you mean" suggestions: the known name closest to an unknown one. Bounded so that
// adversarial input stays cheap: names longer than kMaxSuggestLength get no suggestion,
// candidates whose length differs too much are skipped, and the edit distance is computed in
// a band of width 2 * limit + 1, so a lookup costs O(candidates * kMaxSuggestLength).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace shmapc {

constexpr size_t kMaxSuggestLength = 64;

// The Levenshtein distance of a and b if it is at most `limit`, else limit + 1.
size_t editDistanceWithin(const std::string &a, const std::string &b, size_t limit);

// The candidate within edit distance 2 (and less than the name's length) closest to `name`
// (the first of equally close ones), or "" if none is close.
std::string closestName(const std::string &name, const std::vector<std::string> &cands);

} // namespace shmapc
