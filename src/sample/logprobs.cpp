// Log-probabilities from raw logits (see logprobs.h).
#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sample {

LogprobRecorder::LogprobRecorder(int n_top) : n_top_(std::clamp(n_top, 0, kMaxTopLogprobs)) {}

void LogprobRecorder::capture(std::span<const float> raw_logits) {
  raw_.assign(raw_logits.begin(), raw_logits.end());
  float max = -std::numeric_limits<float>::infinity();
  for (float x : raw_) max = std::max(max, x);
  double sum = 0;
  for (float x : raw_) sum += std::exp(static_cast<double>(x) - max);
  log_sum_ = max + std::log(sum);

  top_.clear();
  if (n_top_ == 0) return;
  auto better = [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.id < b.id);
  };
  // A min-heap of the best n_top_ (by raw logit) seen so far: one pass, no full sort.
  for (int32_t id = 0; id < static_cast<int32_t>(raw_.size()); ++id) {
    const TokenLogprob t{id, raw_[id]};
    if (static_cast<int>(top_.size()) < n_top_) {
      top_.push_back(t);
      std::push_heap(top_.begin(), top_.end(), better);
    } else if (better(t, top_.front())) {
      std::pop_heap(top_.begin(), top_.end(), better);
      top_.back() = t;
      std::push_heap(top_.begin(), top_.end(), better);
    }
  }
  std::sort(top_.begin(), top_.end(), better);
  for (auto& t : top_) t.logprob = static_cast<float>(t.logprob - log_sum_);
}

TokenLogprobs LogprobRecorder::of(int32_t token) const {
  TokenLogprobs out;
  const bool known = token >= 0 && token < static_cast<int32_t>(raw_.size());
  out.chosen = {token, known ? static_cast<float>(raw_[token] - log_sum_)
                             : -std::numeric_limits<float>::infinity()};
  out.top = top_;
  return out;
}

}  // namespace sample
