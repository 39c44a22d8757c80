// The model's own log-probabilities of a sampled token: the log-softmax of the raw logits, taken
// before penalties, biases, constraints and temperature edit them (what llama-server's n_probs and
// vLLM's logprobs report), with the most likely alternatives.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sample {

inline constexpr int kMaxTopLogprobs = 20;  // OpenAI's limit on top_logprobs

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};

struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // most likely first (ties: lower id first)
};

class LogprobRecorder {
 public:
  explicit LogprobRecorder(int n_top);  // 0 to kMaxTopLogprobs alternatives
  // Reads the row as the model produced it, before anything edits it.
  void capture(std::span<const float> raw_logits);
  // The chosen token's log-probability and the alternatives, from the captured row.
  TokenLogprobs of(int32_t token) const;

 private:
  int n_top_;
  std::vector<float> raw_;  // the captured row
  double log_sum_ = 0;      // log Σ exp(logit)
  std::vector<TokenLogprob> top_;
};

}  // namespace sample
