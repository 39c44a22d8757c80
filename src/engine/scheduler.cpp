// Continuous batching: admission by KV room, chunked prefill beside decode, sampling, finishing.
#include "engine/scheduler.h"

#include <algorithm>
#include <optional>

namespace engine {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "?";
}

namespace {
double seconds(Clock::time_point a, Clock::time_point b) {
  return a == Clock::time_point{} || b == Clock::time_point{} ? 0.0 : std::chrono::duration<double>(b - a).count();
}
}  // namespace

double RequestStats::queue_seconds() const { return seconds(submitted, admitted); }
double RequestStats::ttft_seconds() const { return seconds(submitted, first_token); }
double RequestStats::prompt_tokens_per_second() const {
  const double s = seconds(admitted, first_token);
  return s > 0 ? n_prompt / s : 0.0;
}
double RequestStats::generation_tokens_per_second() const {
  const double s = seconds(first_token, finished);
  return s > 0 && n_generated > 1 ? (n_generated - 1) / s : 0.0;
}

struct Scheduler::Sequence {
  int id = 0;
  int slot = -1;
  Request request;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int n_computed = 0;           // tokens whose K/V are in the cache
  int n_generated = 0;
  bool cancelled = false;
  sample::Sampler sampler;
  std::optional<sample::LogprobRecorder> logprobs;  // when the request asks for them
  RequestStats stats;

  Sequence(int id_, Request r) : id(id_), request(std::move(r)), sampler(request.sampling) {
    if (request.on_logprobs) logprobs.emplace(request.n_top_logprobs);
    tokens = request.prompt;
    stats.n_prompt = static_cast<int>(tokens.size());
    stats.submitted = Clock::now();
  }
  // Tokens still to evaluate before the next sample: the rest of the prompt, or the last pick.
  int pending() const { return static_cast<int>(tokens.size()) - n_computed; }
};

Scheduler::Scheduler(Engine& engine, SchedulerOptions options) : engine_(engine), options_(options) {
  for (int s = engine_.cache().config().n_slots - 1; s >= 0; --s) free_slots_.push_back(s);
  const int n = engine_.n_ubatch();
  batch_tokens_.resize(n);
  batch_pos_.resize(n);
  batch_slot_.resize(n);
  batch_output_.resize(n);
  batch_owner_.resize(n);
  // One logits row per sequence sampled in a step, exactly as the plan counts them.
  logits_.resize(static_cast<size_t>(std::min(n, engine_.n_slots())) * engine_.spec().n_vocab);
}

Scheduler::~Scheduler() {
  for (auto& s : running_) finish(*s, FinishReason::kCancelled, "the engine shut down");
  for (auto& s : waiting_) finish(*s, FinishReason::kCancelled, "the engine shut down");
}

SubmitResult Scheduler::submit(Request request) {
  const int n_prompt = static_cast<int>(request.prompt.size());
  const int n_ctx = engine_.n_ctx();
  if (n_prompt == 0) return {-1, Refusal::kInvalid, "the prompt is empty"};
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= engine_.spec().n_vocab) {
      return {-1, Refusal::kInvalid, fmt::format("token id {} is outside the vocabulary", id)};
    }
  }
  // Never a silent truncation: a prompt that does not fit is refused with both counts.
  if (n_prompt > n_ctx) {
    return {-1, Refusal::kContextExceeded,
            fmt::format("the prompt has {} tokens but the context holds {} — shorten the prompt or raise --ctx",
                        n_prompt, n_ctx)};
  }
  if (static_cast<int>(waiting_.size()) >= options_.max_queue) {
    return {-1, Refusal::kQueueFull, fmt::format("{} requests are already waiting — retry later", waiting_.size())};
  }
  const int id = next_id_++;
  waiting_.push_back(std::make_unique<Sequence>(id, std::move(request)));
  return {id, Refusal::kNone, ""};
}

void Scheduler::cancel(int id) {
  for (auto& s : running_) {
    if (s->id == id) s->cancelled = true;
  }
  // A waiting request holds no KV; it leaves the queue now so its place serves the next one.
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id == id) {
      finish(**it, FinishReason::kCancelled);
      waiting_.erase(it);
      return;
    }
  }
}

int Scheduler::n_running() const {
  return static_cast<int>(std::ranges::count_if(running_, [](const auto& s) { return s->slot >= 0; }));
}

void Scheduler::finish(Sequence& seq, FinishReason reason, const std::string& error) {
  if (seq.slot >= 0) {
    engine_.cache().release(seq.slot);  // the KV blocks are free the moment the sequence ends
    free_slots_.push_back(seq.slot);
    seq.slot = -1;
  }
  seq.stats.n_generated = seq.n_generated;
  seq.stats.finished = Clock::now();
  if (seq.request.on_done) seq.request.on_done(reason, seq.stats, error);
  seq.request.on_done = nullptr;
}

// A request is admitted when a slot is free and the cache has the blocks it may need. Requests
// wait in arrival order.
void Scheduler::admit() {
  while (!waiting_.empty()) {
    Sequence& seq = *waiting_.front();
    if (seq.cancelled) {
      finish(seq, FinishReason::kCancelled);
      waiting_.pop_front();
      continue;
    }
    if (free_slots_.empty()) return;
    const int slot = free_slots_.back();
    // Admission by memory: the KV room the request can grow to is reserved up front, so a
    // running request never runs out of cache mid-generation.
    const int n_ctx = engine_.n_ctx();
    const int n_prompt = static_cast<int>(seq.tokens.size());
    const int want = seq.request.max_tokens < 0 ? n_ctx : std::min(n_ctx, n_prompt + seq.request.max_tokens);
    if (!engine_.cache().reserve(slot, want)) return;
    free_slots_.pop_back();
    seq.slot = slot;
    seq.stats.admitted = Clock::now();
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

util::Result<StepStats> Scheduler::step() {
  // Drop cancelled sequences first so their blocks serve this step's admissions.
  for (auto& s : running_) {
    if (s->cancelled) finish(*s, FinishReason::kCancelled);
  }
  std::erase_if(running_, [](const auto& s) { return s->slot < 0; });
  admit();
  StepStats stats;
  if (running_.empty()) return stats;

  // Token budget = one micro-batch. Decoding sequences (one pending token) go first so running
  // streams keep flowing; prefills take what is left, in chunks.
  const int budget = engine_.n_ubatch();
  int n = 0;
  auto schedule = [&](Sequence& seq, int count) {
    for (int i = 0; i < count; ++i) {
      const int pos = seq.n_computed + i;
      batch_tokens_[n] = seq.tokens[pos];
      batch_pos_[n] = pos;
      batch_slot_[n] = seq.slot;
      const bool last = pos == static_cast<int>(seq.tokens.size()) - 1;
      batch_output_[n] = last;
      batch_owner_[n] = last ? &seq : nullptr;
      ++n;
    }
    seq.n_computed += count;
    ++stats.n_sequences;
  };
  for (auto& s : running_) {
    if (s->pending() == 1 && n < budget) schedule(*s, 1);
  }
  for (auto& s : running_) {
    if (s->pending() > 1 && n < budget) {
      const int count = std::min(s->pending(), budget - n);
      stats.n_prefill_tokens += count;
      schedule(*s, count);
    }
  }
  stats.n_tokens = n;
  model::Batch batch{.tokens = std::span(batch_tokens_).first(n), .pos = std::span(batch_pos_).first(n),
                     .slot = std::span(batch_slot_).first(n), .output = std::span(batch_output_).first(n)};
  auto status = engine_.model().forward(batch, engine_.cache(), logits_.data());
  if (!status) {
    for (auto& s : running_) finish(*s, FinishReason::kError, status.error().message());
    running_.clear();
    return std::move(status).error();
  }

  // Sample for each sequence whose last token was evaluated, in batch order.
  const int n_vocab = engine_.spec().n_vocab;
  const int n_ctx = engine_.n_ctx();
  int row = 0;
  for (int i = 0; i < n; ++i) {
    Sequence* seq = batch_owner_[i];
    if (!seq) continue;
    std::span<float> logits(logits_.data() + static_cast<size_t>(row++) * n_vocab, n_vocab);
    const std::span<const int32_t> generated = std::span(seq->tokens).subspan(seq->stats.n_prompt);
    if (seq->logprobs) seq->logprobs->capture(logits);  // the model's own, before anything edits them
    if (seq->request.constrain) seq->request.constrain(logits, generated);
    const int32_t token = seq->sampler.sample(logits, seq->tokens);
    if (seq->n_generated == 0) seq->stats.first_token = Clock::now();
    ++seq->n_generated;
    seq->tokens.push_back(token);
    if (seq->logprobs) seq->request.on_logprobs(seq->logprobs->of(token));
    const bool keep = !seq->request.on_token || seq->request.on_token(token, seq->sampler.last_probability());
    const bool is_end = std::find(seq->request.end_ids.begin(), seq->request.end_ids.end(), token) !=
                        seq->request.end_ids.end();
    if (!keep) finish(*seq, FinishReason::kStop);
    else if (is_end) finish(*seq, FinishReason::kStop);
    else if (seq->request.max_tokens >= 0 && seq->n_generated >= seq->request.max_tokens) finish(*seq, FinishReason::kLength);
    // The newest token is evaluated at position tokens.size() − 1, which must be inside the context.
    else if (static_cast<int>(seq->tokens.size()) > n_ctx) finish(*seq, FinishReason::kLength);
    else if (!engine_.cache().reserve(seq->slot, static_cast<int>(seq->tokens.size()))) {
      // Out of KV blocks mid-generation: end it visibly rather than spill or stall the others.
      finish(*seq, FinishReason::kLength, "the KV cache is full");
    }
  }
  std::erase_if(running_, [](const auto& s) { return s->slot < 0; });
  return stats;
}

}  // namespace engine
