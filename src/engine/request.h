// What a caller asks the engine to generate, and what it reports back per token and at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "sample/logprobs.h"
#include "sample/sampler.h"

namespace engine {

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
std::string_view finish_reason_name(FinishReason reason);  // "stop", "length", …

using Clock = std::chrono::steady_clock;

// Timings of one request, for the CLI's evidence line, /metrics and load reports.
struct RequestStats {
  int n_prompt = 0;
  int n_generated = 0;
  Clock::time_point submitted, admitted, first_token, finished;
  double queue_seconds() const;
  double ttft_seconds() const;                  // submitted → first token
  double prompt_tokens_per_second() const;      // prompt tokens / (admitted → first token)
  double generation_tokens_per_second() const;  // tokens after the first / (first → finished)
};

struct Request {
  std::vector<int32_t> prompt;
  int max_tokens = -1;  // -1: until an end token or the context is full
  sample::SamplingParams sampling;
  std::vector<int32_t> end_ids;  // generation stops after sampling one of these
  // Edits the logits before sampling (grammar constraints); null for none.
  std::function<void(std::span<float> logits, std::span<const int32_t> generated)> constrain;
  // Called for every sampled token (probability of the pick for logprobs). Return false to stop
  // the request now (a stop string matched, the client went away).
  std::function<bool(int32_t token, float probability)> on_token;
  // When set, called just before on_token with the token's log-probability under the model's own
  // distribution (sample/logprobs.h) and the n_top_logprobs most likely alternatives.
  std::function<void(const sample::TokenLogprobs& logprobs)> on_logprobs;
  int n_top_logprobs = 0;
  // Called exactly once when the request ends, whatever the reason.
  std::function<void(FinishReason reason, const RequestStats& stats, const std::string& error)>
      on_done;
};

}  // namespace engine
