// What a caller asks the engine to generate, and what it reports back per token and at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mm/media.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"

namespace engine {

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
std::string_view finish_reason_name(FinishReason reason);  // "stop", "length", …

using Clock = std::chrono::steady_clock;

// Timings of one request, for the CLI's evidence line, /metrics and load reports.
struct RequestStats {
  int n_prompt = 0;
  int n_cached = 0;  // prompt tokens whose KV came from the prefix cache instead of a prefill
  int n_generated = 0;
  int n_preempted = 0;  // times the request gave its KV blocks back and was resumed later
  // Speculative decoding: tokens drafted and verified, and how many of them the model kept.
  int n_drafted = 0;
  int n_accepted = 0;
  Clock::time_point submitted, admitted, first_token, finished;
  double queue_seconds() const;
  double ttft_seconds() const;              // submitted → first token
  double prompt_tokens_per_second() const;  // prompt tokens prefilled / (admitted → first token)
  double generation_tokens_per_second() const;  // tokens after the first / (first → finished)
};

struct Request {
  std::vector<int32_t> prompt;
  // Images and audio clips in the prompt (mm::expand_media makes the prompt and these): each
  // span's soft tokens take its medium's embeddings, encoded when the span is evaluated — always
  // in one micro-batch. Sorted by position; the engine must have encoders for their kinds.
  std::vector<mm::MediaSpan> media;
  // Tokens to generate: -1 until an end token or the context is full; 0 evaluates the prompt only
  // (its K/V stay in the prefix cache; prompt_logits sees its logits).
  int max_tokens = -1;
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
  // Speculative decoding: the most tokens drafted per step (engine/draft.h), at most the engine's
  // plan::Request::n_draft; −1: that many, 0: none. The output is the same either way.
  int n_draft = -1;
  // Writes at most out.size() drafted tokens to follow `tokens` (the prompt and what was generated)
  // and returns how many; null: prompt lookup (engine::ngram_draft). Another drafter plugs in here.
  std::function<int(std::span<const int32_t> tokens, std::span<int32_t> out)> drafter;
  // Start from the longest prefix of the prompt whose K/V the prefix cache holds.
  bool reuse_prefix = true;
  // The LoRA adapter to run under (a name Engine::adapters() holds; empty: the base model) and
  // its scale (none: the adapter's own). A prefix is reused only under the same adapter and scale.
  std::string adapter;
  std::optional<float> adapter_scale;
  // When set, called with the logits after each prompt position the request evaluates, in order
  // (row `pos` predicts token pos + 1): every position, unless the prefix cache served the first
  // stats.n_cached. The engine must be planned with plan::Request::logits_all_positions.
  std::function<void(int pos, std::span<const float> logits)> prompt_logits;
  // Called exactly once when the request ends, whatever the reason.
  std::function<void(FinishReason reason, const RequestStats& stats, const std::string& error)>
      on_done;
};

}  // namespace engine
