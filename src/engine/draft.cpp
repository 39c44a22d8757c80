#include "engine/draft.h"

#include <algorithm>

namespace engine {

int ngram_draft(std::span<const int32_t> tokens, int most, std::span<int32_t> out, int min_ngram,
                int max_ngram) {
  const int n_tokens = static_cast<int>(tokens.size());
  most = std::min(most, static_cast<int>(out.size()));
  if (most <= 0) return 0;
  for (int n = std::min(max_ngram, n_tokens - 1); n >= min_ngram; --n) {
    const auto suffix = tokens.last(n);
    // The latest earlier start of the suffix that has at least one token after it.
    for (int start = n_tokens - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int from = start + n;
      const int count = std::min(most, n_tokens - from);
      std::copy_n(tokens.begin() + from, count, out.begin());
      return count;
    }
  }
  return 0;
}

void DraftLength::record(int drafted, int accepted) {
  next_ = accepted == drafted ? std::min(limit_, std::max(next_, drafted + 1)) : accepted + 1;
}

}  // namespace engine
