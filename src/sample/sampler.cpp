// Sampling chain in llama.cpp's order: penalties → top-k → top-p → min-p → temperature → draw.
#include "sample/sampler.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace sample {

std::string SamplingParams::describe() const {
  if (temperature <= 0) return "greedy";
  return fmt::format("temp {:.2f}, top-k {}, top-p {:.2f}, min-p {:.2f}, repeat {:.2f}/{} presence {:.2f} frequency {:.2f}, seed {}",
                     temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, presence_penalty,
                     frequency_penalty, seed);
}

int SamplingParams::candidates_needed() const {
  const bool penalties = repeat_penalty != 1.0f || presence_penalty != 0 || frequency_penalty != 0;
  if (penalties) return 0;
  if (temperature <= 0) return 1;
  return top_k > 0 ? top_k : 0;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_state_(params.seed) {}

double Sampler::uniform() {  // splitmix64: the same stream on every platform
  uint64_t z = (rng_state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (z >> 11) * (1.0 / 9007199254740992.0);
}

void Sampler::apply_penalties(std::span<const int32_t> recent) {
  const bool any = params_.repeat_penalty != 1.0f || params_.presence_penalty != 0 || params_.frequency_penalty != 0;
  if (!any || recent.empty()) return;
  if (params_.repeat_last_n >= 0 && recent.size() > static_cast<size_t>(params_.repeat_last_n)) {
    recent = recent.last(params_.repeat_last_n);
  }
  const int32_t n_vocab = static_cast<int32_t>(candidates_.size());
  for (int32_t id : recent) {
    if (id >= 0 && id < n_vocab) ++counts_[id];
  }
  for (int32_t id : recent) {
    if (id < 0 || id >= n_vocab || counts_[id] == 0) continue;
    float& logit = candidates_[id].logit;
    if (params_.repeat_penalty != 1.0f) logit = logit > 0 ? logit / params_.repeat_penalty : logit * params_.repeat_penalty;
    logit -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(counts_[id]);
    counts_[id] = 0;  // each distinct token is penalised once; this also resets the counts
  }
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> recent) {
  const size_t n_vocab = logits.size();
  candidates_.resize(n_vocab);
  counts_.resize(n_vocab, 0);
  for (size_t i = 0; i < n_vocab; ++i) candidates_[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
  apply_penalties(recent);

  auto by_logit = [](const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  if (params_.temperature <= 0) {
    const auto best = std::min_element(candidates_.begin(), candidates_.end(), by_logit);
    std::iter_swap(candidates_.begin(), best);
    return draw(1);
  }
  // Top-k: partial sort keeps the work at O(V log k) for the usual small k.
  size_t n = n_vocab;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) n = params_.top_k;
  std::partial_sort(candidates_.begin(), candidates_.begin() + n, candidates_.end(), by_logit);
  return draw(n);
}

int32_t Sampler::sample_top(std::span<const int32_t> ids, std::span<const float> logits) {
  size_t n = ids.size();
  if (params_.temperature <= 0) {
    n = 1;
  } else if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = params_.top_k;
  }
  candidates_.resize(std::max(candidates_.size(), n));
  for (size_t i = 0; i < n; ++i) candidates_[i] = {ids[i], logits[i], 0.0f};
  return draw(n);
}

int32_t Sampler::draw(size_t n) {
  if (params_.temperature <= 0) {
    n_candidates_ = 1;
    candidates_[0].p = 1.0f;
    last_p_ = 1.0f;
    return candidates_[0].id;
  }
  // Probabilities at temperature 1 drive the top-p / min-p cut, as in llama.cpp.
  auto softmax = [&](float temperature) {
    const float max_logit = candidates_[0].logit;
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += candidates_[i].p = std::exp((candidates_[i].logit - max_logit) / temperature);
    for (size_t i = 0; i < n; ++i) candidates_[i].p = static_cast<float>(candidates_[i].p / sum);
  };
  softmax(1.0f);
  if (params_.top_p < 1.0f) {
    double cumulative = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cumulative += candidates_[i].p;
      if (cumulative >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (params_.min_p > 0) {
    const float threshold = params_.min_p * candidates_[0].p;
    size_t keep = 1;
    while (keep < n && candidates_[keep].p >= threshold) ++keep;
    n = keep;
  }
  softmax(params_.temperature);
  n_candidates_ = n;
  const double r = uniform();
  double cumulative = 0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += candidates_[i].p;
    if (r < cumulative) {
      last_p_ = candidates_[i].p;
      return candidates_[i].id;
    }
  }
  last_p_ = candidates_[n - 1].p;
  return candidates_[n - 1].id;
}

}  // namespace sample
