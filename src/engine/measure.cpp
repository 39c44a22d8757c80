// Timed single requests through a Scheduler of their own.
#include "engine/measure.h"

namespace engine {
namespace {

// Runs one request to its end; its stats, or the error it ended with.
util::Result<RequestStats> run_one(Engine& engine, Request r) {
  RequestStats stats;
  std::string error;
  r.on_done = [&](FinishReason, const RequestStats& s, const std::string& e) {
    stats = s;
    error = e;
  };
  Scheduler scheduler(engine);
  const SubmitResult submitted = scheduler.submit(std::move(r));
  if (submitted.refusal != Refusal::kNone) return util::Error(submitted.message);
  HR_TRY(run_until_idle(scheduler));
  if (!error.empty()) return util::Error(error);
  return stats;
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

std::vector<int32_t> random_tokens(const Engine& engine, int n, std::mt19937& rng) {
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % engine.spec().n_vocab);
  return ids;
}

util::Status prefill_only(Engine& engine, std::span<const int32_t> prompt,
                          const std::string& adapter) {
  Request r;
  r.prompt.assign(prompt.begin(), prompt.end());
  r.adapter = adapter;
  r.max_tokens = 0;
  HR_TRY(run_one(engine, std::move(r)));
  return {};
}

util::Result<Throughput> prompt_throughput(Engine& engine, std::span<const int32_t> prefix,
                                           int n_prompt, std::mt19937& rng,
                                           const std::string& adapter) {
  if (!prefix.empty()) HR_TRY(prefill_only(engine, prefix, adapter));
  Request r;
  r.prompt.assign(prefix.begin(), prefix.end());
  r.adapter = adapter;
  const auto tail = random_tokens(engine, n_prompt, rng);
  r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
  r.max_tokens = 0;
  HR_ASSIGN_OR_RETURN(RequestStats s, run_one(engine, std::move(r)));
  const int prefilled = s.n_prompt - s.n_cached;
  return Throughput{prefilled / seconds(s.admitted, s.finished), prefilled};
}

// A greedy request for `prefix` and one random token, generating n_gen tokens.
Request greedy_generation(Engine& engine, std::span<const int32_t> prefix, int n_gen,
                          std::mt19937& rng, const std::string& adapter) {
  Request r;
  r.prompt.assign(prefix.begin(), prefix.end());
  r.adapter = adapter;
  r.prompt.push_back(random_tokens(engine, 1, rng)[0]);
  r.max_tokens = n_gen;
  r.sampling.temperature = 0;
  return r;
}

Throughput generation_of(const RequestStats& s) {
  return Throughput{.tokens_per_second = s.generation_tokens_per_second(),
                    .n_tokens = s.n_generated - 1,
                    .n_drafted = s.n_drafted,
                    .n_accepted = s.n_accepted};
}

util::Result<Throughput> generation_throughput(Engine& engine, std::span<const int32_t> prefix,
                                               int n_gen, std::mt19937& rng,
                                               const std::string& adapter, Drafts drafts) {
  if (!prefix.empty()) HR_TRY(prefill_only(engine, prefix, adapter));
  Request r = greedy_generation(engine, prefix, n_gen, rng, adapter);
  if (drafts == Drafts::kNone) r.n_draft = 0;
  if (drafts != Drafts::kOracle) {
    HR_ASSIGN_OR_RETURN(RequestStats s, run_one(engine, std::move(r)));
    return generation_of(s);
  }
  const size_t n_prompt = r.prompt.size();
  Request plain = r;
  plain.n_draft = 0;
  std::vector<int32_t> picks;
  plain.on_token = [&](int32_t token, float) {
    picks.push_back(token);
    return true;
  };
  HR_TRY(run_one(engine, std::move(plain)));
  r.drafter = [&](std::span<const int32_t> tokens, std::span<int32_t> out) {
    const size_t at = std::min(tokens.size() - n_prompt, picks.size());
    const size_t n = std::min(out.size(), picks.size() - at);
    std::copy_n(picks.begin() + static_cast<ptrdiff_t>(at), n, out.begin());
    return static_cast<int>(n);
  };
  HR_ASSIGN_OR_RETURN(RequestStats s, run_one(engine, std::move(r)));
  return generation_of(s);
}

}  // namespace engine
