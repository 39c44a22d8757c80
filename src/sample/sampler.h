// sample::Sampler — turns logits into the next token: penalties, top-k, top-p, min-p, temperature.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sample {

struct SamplingParams {
  float temperature = 0.8f;    // 0: greedy (argmax after penalties)
  int top_k = 40;              // keep the k most likely (0: all)
  float top_p = 0.95f;         // keep the smallest set whose probability reaches p (1: all)
  float min_p = 0.05f;         // drop tokens below min_p × the top probability (0: none)
  float repeat_penalty = 1.0f; // divide positive / multiply negative logits of recent tokens (1: off)
  int repeat_last_n = 64;      // how many recent tokens the penalties look at (-1: all)
  float presence_penalty = 0;  // subtract once from any recent token's logit
  float frequency_penalty = 0; // subtract per occurrence in the recent tokens
  uint64_t seed = 0xC0FFEE;    // same seed, same tokens

  std::string describe() const;  // one line for logs and reports
  // How many of the most likely tokens sample_top() needs to pick exactly what sample() would:
  // 1 when greedy, top_k when it bounds the candidates; 0 when every logit is needed (penalties
  // rewrite logits before the cut, or no top-k).
  int candidates_needed() const;
};

struct Candidate {
  int32_t id;
  float logit;
  float p;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks the next token. `recent` are the tokens the penalties look at (prompt and output so far).
  // Allocation-free after the first call for a given vocabulary size.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> recent);
  // The same pick from only the most likely tokens: ids and their logits sorted by logit, largest
  // first (ties: the lower id first), at least candidates_needed() of them. Needs no penalties.
  int32_t sample_top(std::span<const int32_t> ids, std::span<const float> logits);
  // Probability the final distribution gave the chosen token (for logprobs); valid after sample().
  float last_probability() const { return last_p_; }
  // The candidates that survived filtering, most likely first; valid after sample().
  std::span<const Candidate> candidates() const { return {candidates_.data(), n_candidates_}; }

  const SamplingParams& params() const { return params_; }

 private:
  void apply_penalties(std::span<const int32_t> recent);
  // The pick among candidates_[0, n), sorted most likely first: top-p, min-p, temperature, draw.
  int32_t draw(size_t n);
  double uniform();

  SamplingParams params_;
  uint64_t rng_state_;
  std::vector<Candidate> candidates_;
  std::vector<int32_t> counts_;  // per token id, reset after each use
  size_t n_candidates_ = 0;
  float last_p_ = 1.0f;
};

}  // namespace sample
