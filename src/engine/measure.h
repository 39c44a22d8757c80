// Timed requests through the scheduler — the path run and serve take — for bench and doctor.
#pragma once

#include <random>
#include <string>

#include "engine/scheduler.h"

namespace engine {

struct Throughput {
  double tokens_per_second = 0;
  int n_tokens = 0;                   // tokens the rate counts
  int n_drafted = 0, n_accepted = 0;  // speculative decoding (plan::Request::n_draft)
};

// Random token ids of `engine`'s vocabulary.
std::vector<int32_t> random_tokens(const Engine& engine, int n, std::mt19937& rng);

// Prompt processing at `depth`: a request of `prefix` (depth tokens, evaluated first untimed and
// then reused from the prefix cache) followed by `n_prompt` random tokens, timed from admission
// to the end of its prefill. Counts the tokens it prefilled (a prefix that ends inside a KV block
// leaves the rest of that block to prefill). Every request runs under the LoRA adapter named
// `adapter` (empty: none).
util::Result<Throughput> prompt_throughput(Engine& engine, std::span<const int32_t> prefix,
                                           int n_prompt, std::mt19937& rng,
                                           const std::string& adapter = {});
// Speculative decoding in a generation measurement, on an engine planned with
// plan::Request::n_draft: none; the engine's drafts (prompt lookup); or drafts that are always
// right — the tokens of the same run made first without drafts (untimed) — which shows what
// verifying n_draft + 1 tokens a step gains on these kernels when every draft is kept, whatever
// the weights.
enum class Drafts { kNone, kEngine, kOracle };

// Generation at `depth`: `prefix` and one token, then `n_gen` tokens greedily (no end token),
// timed from the first token to the last.
util::Result<Throughput> generation_throughput(Engine& engine, std::span<const int32_t> prefix,
                                               int n_gen, std::mt19937& rng,
                                               const std::string& adapter = {},
                                               Drafts drafts = Drafts::kEngine);
// Evaluates `prompt` without generating (its K/V stay in the prefix cache): a warm-up, or a
// depth for the measurements above.
util::Status prefill_only(Engine& engine, std::span<const int32_t> prompt,
                          const std::string& adapter = {});

}  // namespace engine
