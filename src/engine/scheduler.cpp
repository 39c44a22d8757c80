// Continuous batching: admission by KV room with prefix reuse, chunked prefill beside decode,
// growth with preemption, sampling, finishing.
#include "engine/scheduler.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <string>

#include "engine/draft.h"
#include "util/log.h"

namespace engine {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

namespace {

// The prefix cache's key for soft token i of a medium: the soft tokens' ids are the same for every
// image (or clip), so the cache compares these instead — negative, never a vocabulary id, and
// different for different media (30 bits of the content hash mixed with i per position).
int32_t media_key(uint64_t hash, int i) {
  uint64_t z = hash + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return -2 - static_cast<int32_t>(z >> 34);
}

// The one-line reason a request's media cannot run here, or empty.
std::string check_media(const Request& r, const Engine& engine) {
  const mm::Encoders* encoders = engine.encoders();
  int end = 0;
  for (const mm::MediaSpan& span : r.media) {
    if (!span.media || span.n_tokens != span.media->n_tokens || span.n_tokens <= 0 ||
        span.first < end || span.first + span.n_tokens > static_cast<int>(r.prompt.size()))
      return "the request's media spans do not match its prompt (make both with mm::expand_media)";
    end = span.first + span.n_tokens;
    if (util::Status takes = engine.takes(span.media->kind); !takes) return takes.error().message();
    const bool image = span.media->kind == mm::MediaKind::kImage;
    const mm::MediaLimits& limits = encoders->limits();
    const int most =
        image ? limits.image_tokens : mm::AudioEncoder::max_tokens(limits.audio_seconds);
    if (span.n_tokens > most) {
      return fmt::format("{} of {} tokens is larger than this run takes ({} at most) — {}",
                         image ? "an image" : "a clip", span.n_tokens, most,
                         image
                             ? "ask for fewer image tokens or restart with a larger --image-tokens"
                             : "send a shorter clip or restart with a larger --audio-seconds");
    }
    if (span.n_tokens > engine.n_ubatch()) {
      return fmt::format(
          "{} of {} tokens does not fit the micro-batch of {} (it is never split) — raise "
          "--ubatch",
          image ? "an image" : "a clip", span.n_tokens, engine.n_ubatch());
    }
  }
  return {};
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return a == Clock::time_point{} || b == Clock::time_point{}
             ? 0.0
             : std::chrono::duration<double>(b - a).count();
}
}  // namespace

double RequestStats::queue_seconds() const {
  return seconds(submitted, admitted);
}
double RequestStats::ttft_seconds() const {
  return seconds(submitted, first_token);
}
double RequestStats::prompt_tokens_per_second() const {
  const double s = seconds(admitted, first_token);
  return s > 0 ? (n_prompt - n_cached) / s : 0.0;
}
double RequestStats::generation_tokens_per_second() const {
  const double s = seconds(first_token, finished);
  return s > 0 && n_generated > 1 ? (n_generated - 1) / s : 0.0;
}

struct Scheduler::Sequence {
  int id = 0;  // arrival order: the highest running id is the youngest, preempted first
  int slot = -1;
  Request request;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int n_computed = 0;           // tokens whose K/V are in the cache
  int n_generated = 0;
  int n_scheduled = 0;  // tokens this step evaluates
  int n_reported = 0;   // prompt positions whose logits prompt_logits has seen (once each)
  bool cancelled = false;
  bool preempted = false;  // gave its slot back this step; waits to resume
  sample::Sampler sampler;
  std::optional<sample::LogprobRecorder> logprobs;  // when the request asks for them
  RequestStats stats;
  // Its LoRA adapter: the model's slot (−1: none), the scale, and the prefix cache's context.
  int adapter_slot = -1;
  float adapter_scale = 0;
  uint64_t prefix_context = 0;

  // With media: the tokens as the prefix cache keys them, each soft token keyed by its medium.
  std::vector<int32_t> keys;

  // Speculative decoding: the tokens drafted this step (evaluated after the last one), how many
  // the next draft may hold, the position sampled first this step, and the drafts kept so far.
  std::vector<int32_t> draft;
  DraftLength draft_length{0};
  int first_sampled = 0;
  int accepted = 0;

  Sequence(int id_, Request r, int n_draft)
      : id(id_), request(std::move(r)), sampler(request.sampling), draft_length(n_draft) {
    draft.reserve(n_draft);
    if (request.on_logprobs) logprobs.emplace(request.n_top_logprobs);
    tokens = request.prompt;
    stats.n_prompt = static_cast<int>(tokens.size());
    stats.submitted = Clock::now();
    if (request.media.empty()) return;
    keys = tokens;
    for (const mm::MediaSpan& span : request.media) {
      for (int i = 0; i < span.n_tokens; ++i) keys[span.first + i] = media_key(span.media->hash, i);
    }
  }
  // Tokens still to evaluate before the next sample: the rest of the prompt, or the last pick.
  int pending() const { return static_cast<int>(tokens.size()) - n_computed; }
  bool all_logits() const { return static_cast<bool>(request.prompt_logits); }
  std::span<const int32_t> cache_keys() const {
    return request.media.empty() ? std::span<const int32_t>(tokens) : keys;
  }
  void append(int32_t token) {
    tokens.push_back(token);
    if (!request.media.empty()) keys.push_back(token);
  }
  // Tokens it may still generate (INT_MAX: until an end token or the context is full).
  int remaining() const {
    return request.max_tokens < 0 ? INT_MAX : request.max_tokens - n_generated;
  }
  // The medium whose soft tokens include position `pos`, or null.
  const mm::MediaSpan* media_at(int pos) const {
    for (const mm::MediaSpan& span : request.media) {
      if (pos >= span.first && pos <= span.last()) return &span;
    }
    return nullptr;
  }
  // The most of the next n tokens that end outside every medium: a medium (what is left of it
  // after a reused prefix) is evaluated in one micro-batch — an image's tokens may see each other
  // both ways — so a chunk ends before one it cannot hold, and holds nothing when it starts at one.
  int whole_media(int n) const {
    for (const mm::MediaSpan& span : request.media) {
      const int start = std::max(span.first, n_computed);
      if (start < n_computed + n && span.last() >= n_computed + n) return start - n_computed;
    }
    return n;
  }
};

Scheduler::Scheduler(Engine& engine, SchedulerOptions options)
    : engine_(engine), options_(options) {
  for (int s = engine_.n_slots() - 1; s >= 0; --s) free_slots_.push_back(s);
  const int n = engine_.n_ubatch();
  batch_tokens_.resize(n);
  batch_pos_.resize(n);
  batch_slot_.resize(n);
  batch_output_.resize(n);
  batch_adapter_.resize(n);
  batch_scale_.resize(n);
  batch_owner_.resize(n);
  batch_embedded_.resize(n);
  batch_from_.resize(n);
  batch_until_.resize(n);
  // The logits rows one step computes, exactly as the plan counts them.
  const size_t logit_rows = plan::logit_rows(engine_.plan().request);
  top_ids_.resize(logit_rows * model::Outputs::kMaxTopK);
  top_logits_.resize(logit_rows * model::Outputs::kMaxTopK);
  logits_.resize(logit_rows * engine_.spec().n_vocab);
  if (const model::Assistant* a = engine_.assistant()) {
    const size_t width = engine_.spec().n_embd, rows = a->max_batch();
    hidden_rows_.resize(logit_rows * width);
    slot_hidden_.resize(engine_.n_slots() * width);
    step_hidden_.resize(rows * width);
    slot_has_hidden_.assign(engine_.n_slots(), 0);
    draft_tokens_.resize(rows);
    draft_pos_.resize(rows);
    draft_slot_.resize(rows);
    draft_ids_.resize(rows);
    draft_top_.resize(rows);
  }
  drafter_wanted_.reserve(engine_.n_slots());
  model_wants_.reserve(engine_.n_slots());
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
      return {-1, Refusal::kInvalid,
              fmt::format("token id {} is outside the vocabulary (0..{})", id,
                          engine_.spec().n_vocab - 1)};
    }
  }
  // Never a silent truncation: a prompt that does not fit is refused with both counts. The plan
  // guarantees the KV pool holds at least one whole context, so anything shorter fits, if need
  // be alone.
  if (n_prompt > n_ctx) {
    return {-1, Refusal::kContextExceeded,
            fmt::format("the prompt has {} tokens but the context holds {} — shorten the prompt or "
                        "raise --ctx",
                        n_prompt, n_ctx)};
  }
  if (std::string media = check_media(request, engine_); !media.empty())
    return {-1, Refusal::kInvalid, std::move(media)};
  if (request.prompt_logits && !engine_.plan().request.logits_all_positions) {
    return {-1, Refusal::kInvalid,
            "logits of every prompt position need an engine planned for them "
            "(plan::Request::logits_all_positions)"};
  }
  if (static_cast<int>(waiting_.size()) >= options_.max_queue) {
    return {-1, Refusal::kQueueFull,
            fmt::format("{} requests are already waiting — retry later", waiting_.size())};
  }
  if (request.adapter_scale && !std::isfinite(*request.adapter_scale)) {
    return {-1, Refusal::kInvalid,
            fmt::format("the LoRA scale {} is not a finite number", *request.adapter_scale)};
  }
  std::optional<AdapterInfo> adapter;
  if (!request.adapter.empty()) {
    adapter = engine_.adapters().acquire(request.adapter);
    if (!adapter) {
      return {-1, Refusal::kUnknownAdapter,
              fmt::format("no adapter named '{}' is loaded", request.adapter)};
    }
  }
  const int id = next_id_++;
  const int n_draft =
      std::min(request.n_draft < 0 ? INT_MAX : request.n_draft, engine_.plan().request.n_draft);
  auto seq = std::make_unique<Sequence>(id, std::move(request), n_draft);
  if (adapter) {
    seq->adapter_slot = adapter->slot;
    seq->adapter_scale = seq->request.adapter_scale.value_or(adapter->scale);
    seq->prefix_context = adapter_context(adapter->id, seq->adapter_scale);
  }
  waiting_.push_back(std::move(seq));
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
  return static_cast<int>(
      std::ranges::count_if(running_, [](const auto& s) { return s->slot >= 0; }));
}

void Scheduler::finish(Sequence& seq, FinishReason reason, const std::string& error) {
  if (seq.slot >= 0) {
    engine_.cache().release(seq.slot);  // the KV blocks are free the moment the sequence ends
    free_slots_.push_back(seq.slot);
    seq.slot = -1;
  }
  if (seq.adapter_slot >= 0) {
    engine_.adapters().release(seq.adapter_slot);
    seq.adapter_slot = -1;
  }
  seq.stats.n_generated = seq.n_generated;
  seq.stats.finished = Clock::now();
  if (seq.request.on_done) seq.request.on_done(reason, seq.stats, error);
  seq.request.on_done = nullptr;
}

// Takes `slot` for `seq` if the pool can hold the rest of its tokens, starting from the longest
// prefix the cache holds, while leaving a block for each running sequence to grow into: a
// newcomer never takes what running ones are about to need.
bool Scheduler::admit_one(Sequence& seq, int slot) {
  kv::Cache& cache = engine_.cache();
  const bool resuming = seq.stats.admitted != Clock::time_point{};
  std::span<const int32_t> known = seq.cache_keys();
  // A resumed request whose prompt logits are wanted recomputes what it has not reported yet.
  if (resuming && seq.all_logits())
    known = known.first(std::min(known.size(), size_t(seq.n_reported) + 1));
  int reused = seq.request.reuse_prefix ? cache.reuse_prefix(slot, known, seq.prefix_context) : 0;
  // A reused prefix never ends inside an image seen both ways: its rest would need keys of it
  // the sliding layers' window no longer holds. (The rest of a causal medium is evaluated alone.)
  while (const mm::MediaSpan* cut = reused > 0 ? seq.media_at(reused) : nullptr) {
    if (cut->first == reused || !cut->both_ways) break;
    cache.release(slot);
    reused = cache.reuse_prefix(slot, known.first(cut->first + 1), seq.prefix_context);
  }
  const int n = static_cast<int>(seq.tokens.size());
  if (!cache.can_reserve(slot, n, static_cast<int>(running_.size()))) {
    cache.release(slot);
    return false;
  }
  seq.slot = slot;
  seq.n_computed = reused;
  if (!slot_has_hidden_.empty()) slot_has_hidden_[slot] = 0;  // a drafter waits for its sample
  if (!resuming) {
    seq.stats.admitted = Clock::now();
    seq.stats.n_cached = reused;
    seq.n_reported = reused;  // the cache served those positions: no logits for them
    counters_.prompt_tokens += n;
    counters_.cached_tokens += reused;
  }
  return true;
}

// Whether `seq` should wait for a running sequence that is prefilling a prompt beginning as its
// own: the shared whole blocks become reusable as they are computed, so waiting for them costs
// less than computing them twice (the n choices of one request, a burst of requests with one
// system prompt).
bool Scheduler::waits_for_a_prefill(const Sequence& seq) const {
  const kv::Cache& cache = engine_.cache();
  if (!seq.request.reuse_prefix || !cache.config().prefix_cache) return false;
  const int block = cache.config().block_cells;
  for (const auto& r : running_) {
    if (r->slot < 0 || !r->request.reuse_prefix || r->n_computed >= r->stats.n_prompt) continue;
    // Only blocks cached under the same adapter and the same media can be shared.
    if (r->prefix_context != seq.prefix_context) continue;
    const std::span<const int32_t> mine = seq.cache_keys(), theirs = r->cache_keys();
    // Reuse leaves the last token to evaluate, and only whole blocks of r's prompt are shared.
    const size_t limit = std::min(mine.size() - 1, static_cast<size_t>(r->stats.n_prompt));
    const auto common = static_cast<int>(
        std::mismatch(mine.begin(), mine.begin() + limit, theirs.begin()).first - mine.begin());
    const int shared = common / block * block;
    if (shared > 0 && r->n_computed < shared) return true;
  }
  return false;
}

// Requests are admitted in arrival order (preempted ones first) while a slot is free and the
// pool has room for them; one whose prompt's start another sequence is prefilling waits for it.
void Scheduler::admit() {
  while (!waiting_.empty()) {
    Sequence& seq = *waiting_.front();
    if (seq.cancelled) {
      finish(seq, FinishReason::kCancelled);
      waiting_.pop_front();
      continue;
    }
    if (free_slots_.empty() || waits_for_a_prefill(seq) || !admit_one(seq, free_slots_.back()))
      return;
    free_slots_.pop_back();
    seq.preempted = false;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

// Token budget = one micro-batch. Decoding sequences (one pending token) go first so running
// streams keep flowing, then their drafts; prefills take what is left, in chunks. (A sequence may
// evaluate several tokens in a step: n_scheduled is a count, not a mode.)
void Scheduler::choose_tokens(StepStats& stats) {
  const int budget = engine_.n_ubatch();
  int n = 0;
  for (auto& s : running_) {
    s->n_scheduled = 0;
    s->draft.clear();
    if (s->pending() == 1 && n < budget) n += s->n_scheduled = 1;
  }
  // What a drafted row would cost, as a share of this step so far (engine/draft.h): verifying
  // it, and where the engine's drafter makes it, one more of the drafter's passes.
  const bool assistant = engine_.assistant() != nullptr;
  const DraftModel* draft_model = engine_.draft_model();
  const double row_share = options_.draft_row_share.value_or(step_cost_.row_share(n));
  const double drafter_row_share =
      options_.draft_row_share.value_or(step_cost_.row_share(n, engine_.drafter_pass_seconds()));
  drafter_wanted_.clear();
  for (auto& s : running_) {
    if (s->n_scheduled != 1 || n >= budget) continue;
    // The engine's drafter drafts for every sequence without one of its own: an assistant from
    // its hidden state, a draft model from its tokens (it cannot see media: such a sequence
    // drafts by prompt lookup).
    const bool by_drafter =
        !s->request.drafter && (assistant || (draft_model != nullptr && s->request.media.empty()));
    // Its drafts are priced against a plain decode step: none until one has been timed (if every
    // step verified as many drafts, the steps' fit would take one with drafts for a plain one).
    if (by_drafter && !options_.draft_row_share && step_cost_.passes() == 0) continue;
    const int wanted = s->draft_length.next(by_drafter ? drafter_row_share : row_share);
    if (wanted <= 0) continue;
    if (by_drafter) {
      const int most = std::min(
          {wanted, budget - n, engine_.n_ctx() - int(s->tokens.size()), s->remaining() - 1});
      if (most > 0 && (!assistant || slot_has_hidden_[s->slot]) &&
          std::ssize(drafter_wanted_) < plan::drafter_rows(engine_.plan().request)) {
        drafter_wanted_.emplace_back(s.get(), most);
        n += most;
      }
      continue;
    }
    n += draft(*s, std::min(wanted, budget - n));
  }
  if (!drafter_wanted_.empty()) {
    const auto started = Clock::now();
    if (assistant)
      draft_with_assistant(drafter_wanted_);
    else
      draft_with_model(drafter_wanted_);
    drafter_seconds_ = seconds(started, Clock::now());
    // A failed drafter step drafts less than was counted: prompt chunks take the rest.
    for (const auto& [seq, most] : drafter_wanted_) n -= most - static_cast<int>(seq->draft.size());
  }
  for (auto& s : running_) {
    if (s->pending() > 1 && n < budget) {
      s->n_scheduled = s->whole_media(std::min(s->pending(), budget - n));
      n += s->n_scheduled;
      stats.n_prefill_tokens += s->n_scheduled;
    }
  }
}

// Drafts at most `wanted` tokens for decoding `seq` to verify after its last token, within its
// context and what it may still generate (the pick after the last draft is one more).
int Scheduler::draft(Sequence& seq, int wanted) {
  const int n_tokens = static_cast<int>(seq.tokens.size());
  const int most = std::min({wanted, engine_.n_ctx() - n_tokens, seq.remaining() - 1});
  if (most <= 0) return 0;
  seq.draft.resize(most);  // within the capacity reserved when the request arrived
  const int n = seq.request.drafter ? seq.request.drafter(seq.tokens, seq.draft)
                                    : ngram_draft(seq.tokens, most, seq.draft);
  seq.draft.resize(std::clamp(n, 0, most));
  seq.n_scheduled += static_cast<int>(seq.draft.size());
  return static_cast<int>(seq.draft.size());
}

// Drafts greedily with the engine's assistant for each (sequence, most drafts), all sequences in
// one step per draft position: longest first, so a shorter one's row leaves from the end and each
// row keeps its index and its hidden state. Every step queries the position of the sequence's
// last token, which the model has not evaluated yet, over the cache before it. A step that fails
// leaves the drafts made so far: drafts are only guesses.
void Scheduler::draft_with_assistant(std::vector<std::pair<Sequence*, int>>& wanted) {
  model::Assistant& assistant = *engine_.assistant();
  const size_t width = engine_.spec().n_embd;
  std::ranges::sort(wanted, std::greater<>{}, &std::pair<Sequence*, int>::second);
  for (size_t i = 0; i < wanted.size(); ++i) {
    const Sequence& seq = *wanted[i].first;
    std::copy_n(slot_hidden_.begin() + seq.slot * width, width, step_hidden_.begin() + i * width);
    draft_pos_[i] = static_cast<int32_t>(seq.tokens.size()) - 2;
    draft_slot_[i] = seq.slot;
  }
  for (int k = 0; k < wanted.front().second; ++k) {
    int rows = 0;
    while (rows < std::ssize(wanted) && wanted[rows].second > k) {
      const Sequence& seq = *wanted[rows].first;
      draft_tokens_[rows] = k == 0 ? seq.tokens.back() : seq.draft[k - 1];
      ++rows;
    }
    const model::DraftBatch batch{.tokens = std::span(draft_tokens_).first(rows),
                                  .pos = std::span(draft_pos_).first(rows),
                                  .slot = std::span(draft_slot_).first(rows),
                                  .hidden = step_hidden_.data()};
    const auto started = Clock::now();
    const util::Status status = assistant.step(batch, engine_.cache(),
                                               {.logits = logits_.data(),
                                                .top_k = 1,
                                                .top_ids = draft_ids_.data(),
                                                .top_logits = draft_top_.data()},
                                               step_hidden_.data());
    engine_.assistant_steps().record(rows, seconds(started, Clock::now()));
    if (!status) {
      util::log_warn("speculative decoding: the drafter failed ({}); this step drafts less",
                     status.error().message());
      break;
    }
    for (int i = 0; i < rows; ++i) wanted[i].first->draft.push_back(draft_ids_[i]);
  }
  for (auto& [seq, most] : wanted) seq->n_scheduled += static_cast<int>(seq->draft.size());
}

// Drafts with the engine's draft model for each (sequence, most drafts): it catches up on each
// sequence's tokens, then drafts them all one position per pass.
void Scheduler::draft_with_model(std::vector<std::pair<Sequence*, int>>& wanted) {
  DraftModel& draft_model = *engine_.draft_model();
  model_wants_.clear();
  for (auto& [seq, most] : wanted)
    model_wants_.push_back(
        {.tokens = seq->tokens, .slot = seq->slot, .most = most, .out = &seq->draft});
  if (const util::Status status = draft_model.draft(model_wants_); !status) {
    util::log_warn("speculative decoding: the draft model failed ({}); this step drafts less",
                   status.error().message());
  }
  for (auto& [seq, most] : wanted) seq->n_scheduled += static_cast<int>(seq->draft.size());
}

// The model's hidden state at output row `row`, which sampled `seq`'s last token: where its
// next drafts start.
void Scheduler::keep_hidden(const Sequence& seq, int row) {
  if (slot_has_hidden_.empty()) return;
  const size_t width = engine_.spec().n_embd;
  std::copy_n(hidden_rows_.begin() + row * width, width, slot_hidden_.begin() + seq.slot * width);
  slot_has_hidden_[seq.slot] = 1;
}

// Encodes the media this step evaluates into the engine's media rows, at the batch rows their
// soft tokens take (sequences in running_ order, each one's tokens together, as assemble_batch
// lays them out). A medium a reused prefix ends inside is encoded whole aside and its rest copied.
// A sequence whose medium fails to encode ends with the error and evaluates nothing.
void Scheduler::encode_media() {
  mm::Encoders* encoders = engine_.encoders();
  if (encoders == nullptr) return;
  const size_t H = static_cast<size_t>(engine_.spec().n_embd);
  int row = 0;
  for (auto& s : running_) {
    Sequence& seq = *s;
    if (seq.n_scheduled == 0) continue;
    util::Status status;
    for (const mm::MediaSpan& span : seq.request.media) {
      const int begin = std::max(span.first, seq.n_computed);
      if (span.last() < begin || begin >= seq.n_computed + seq.n_scheduled) continue;
      const auto rows = engine_.media_rows().subspan((row + begin - seq.n_computed) * H,
                                                     (span.last() + 1 - begin) * H);
      if (begin == span.first) {
        status = encoders->encode(*span.media, rows);
      } else {
        const auto whole = engine_.media_whole().first(span.n_tokens * H);
        status = encoders->encode(*span.media, whole);
        std::copy(whole.end() - rows.size(), whole.end(), rows.begin());
      }
      if (!status) break;
    }
    if (!status) {
      seq.n_scheduled = 0;
      finish(seq, FinishReason::kError, status.error().message());
      continue;
    }
    row += seq.n_scheduled;
  }
}

void Scheduler::preempt(Sequence& seq) {
  engine_.cache().release(seq.slot);  // its complete blocks stay cached for the resumption
  free_slots_.push_back(seq.slot);
  seq.slot = -1;
  seq.n_computed = 0;
  seq.n_scheduled = 0;
  seq.preempted = true;
  ++seq.stats.n_preempted;
  ++counters_.preemptions;
}

// Oldest first, each scheduled sequence gets the blocks for its tokens; when the pool is short,
// the youngest sequence holding blocks gives them back — possibly the one asking, which then
// waits. The oldest always fits: the pool holds at least one whole context. Drafts only take
// blocks that are left: a draft that does not fit is dropped, never a reason to preempt.
void Scheduler::make_room(StepStats& stats) {
  std::vector<Sequence*> by_age;
  for (auto& s : running_) by_age.push_back(s.get());
  std::ranges::sort(by_age, {}, &Sequence::id);
  kv::Cache& cache = engine_.cache();
  for (Sequence* seq : by_age) {
    if (seq->slot < 0 || seq->n_scheduled == 0) continue;
    const int wanted = seq->n_computed + seq->n_scheduled - static_cast<int>(seq->draft.size());
    while (!cache.reserve(seq->slot, wanted)) {
      auto youngest = std::ranges::find_if(by_age.rbegin(), by_age.rend(),
                                           [](const Sequence* s) { return s->slot >= 0; });
      Sequence& victim = **youngest;
      preempt(victim);
      ++stats.n_preempted;
      if (&victim == seq) break;
    }
  }
  for (Sequence* seq : by_age) {
    if (seq->slot < 0 || seq->draft.empty() ||
        cache.reserve(seq->slot, seq->n_computed + seq->n_scheduled))
      continue;
    seq->n_scheduled -= static_cast<int>(seq->draft.size());
    seq->draft.clear();
  }
  // Preempted sequences wait at the front, oldest first, and resume before anything new.
  std::vector<std::unique_ptr<Sequence>> back;
  for (auto& s : running_) {
    if (s->preempted) back.push_back(std::move(s));
  }
  std::erase(running_, nullptr);
  std::ranges::sort(back, std::greater<>{}, &Sequence::id);
  for (auto& s : back) waiting_.push_front(std::move(s));
}

int Scheduler::assemble_batch() {
  int n = 0;
  batch_has_media_ = batch_sees_images_ = false;
  for (auto& s : running_) {
    Sequence& seq = *s;
    const int n_tokens = static_cast<int>(seq.tokens.size());
    seq.first_sampled = n_tokens - 1;
    seq.accepted = 0;
    if (!seq.draft.empty()) {
      seq.stats.n_drafted += static_cast<int>(seq.draft.size());
      counters_.drafted_tokens += seq.draft.size();
    }
    for (int i = 0; i < seq.n_scheduled; ++i) {
      const int pos = seq.n_computed + i;
      batch_tokens_[n] = pos < n_tokens ? seq.tokens[pos] : seq.draft[pos - n_tokens];
      batch_pos_[n] = pos;
      batch_slot_[n] = seq.slot;
      batch_adapter_[n] = seq.adapter_slot;
      batch_scale_[n] = seq.adapter_scale;
      const mm::MediaSpan* medium = seq.media_at(pos);
      batch_embedded_[n] = medium != nullptr;
      batch_from_[n] = medium && medium->both_ways ? medium->first : pos;
      batch_until_[n] = medium && medium->both_ways ? medium->last() : pos;
      batch_has_media_ |= medium != nullptr;
      batch_sees_images_ |= medium && medium->both_ways;
      // The last token and each drafted one: a row of logits to sample from.
      const bool sampled = pos >= n_tokens - 1;
      const bool out = sampled || (seq.all_logits() && pos < seq.stats.n_prompt);
      batch_output_[n] = out;
      batch_owner_[n] = out ? &seq : nullptr;
      ++n;
    }
  }
  return n;
}

// Hands out each output row: prompt logits to whoever asked, then a sample for each sequence whose
// last token was evaluated, in batch order. A drafted row is sampled only while the drafts before
// it equal the picks (its token is then the sequence's last): the same picks, from the same
// logits and the same sampler state, as without the draft.
void Scheduler::sample(int n_batch, int k) {
  const int n_vocab = engine_.spec().n_vocab;
  const int n_ctx = engine_.n_ctx();
  int row = 0;
  for (int i = 0; i < n_batch; ++i) {
    Sequence* seq = batch_owner_[i];
    if (!seq) continue;
    const size_t r = static_cast<size_t>(row++);
    std::span<float> logits(logits_.data() + r * n_vocab, n_vocab);
    const int pos = batch_pos_[i];
    if (seq->all_logits() && pos < seq->stats.n_prompt && pos >= seq->n_reported) {
      seq->request.prompt_logits(pos, logits);  // once, even when a resumption recomputes it
      seq->n_reported = pos + 1;
    }
    if (seq->slot < 0 || pos != static_cast<int>(seq->tokens.size()) - 1 ||
        batch_tokens_[i] != seq->tokens[pos])
      continue;
    if (pos > seq->first_sampled) {  // the draft at pos was picked
      ++seq->accepted;
      ++seq->stats.n_accepted;
      ++counters_.accepted_tokens;
    }
    if (seq->request.max_tokens == 0) {
      finish(*seq, FinishReason::kLength);
      continue;
    }
    const std::span<const int32_t> generated = std::span(seq->tokens).subspan(seq->stats.n_prompt);
    if (seq->logprobs) seq->logprobs->capture(logits);  // the model's own, before any edit
    if (seq->request.constrain) seq->request.constrain(logits, generated);
    const int32_t token = k > 0 ? seq->sampler.sample_top(std::span(top_ids_).subspan(r * k, k),
                                                          std::span(top_logits_).subspan(r * k, k))
                                : seq->sampler.sample(logits, seq->tokens);
    if (seq->n_generated == 0) seq->stats.first_token = Clock::now();
    ++seq->n_generated;
    seq->append(token);
    keep_hidden(*seq, static_cast<int>(r));
    if (seq->logprobs) seq->request.on_logprobs(seq->logprobs->of(token));
    const bool keep =
        !seq->request.on_token || seq->request.on_token(token, seq->sampler.last_probability());
    const bool is_end = std::find(seq->request.end_ids.begin(), seq->request.end_ids.end(),
                                  token) != seq->request.end_ids.end();
    if (!keep || is_end) {
      finish(*seq, FinishReason::kStop);
    } else if (seq->request.max_tokens >= 0 && seq->n_generated >= seq->request.max_tokens) {
      finish(*seq, FinishReason::kLength);
    } else if (static_cast<int>(seq->tokens.size()) > n_ctx) {
      // The newest token is evaluated at position tokens.size() − 1: inside the context.
      finish(*seq, FinishReason::kLength);
    }
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
  // A decode step's time, forward pass and sampling, prices the next steps' drafts; the engine's
  // drafter's passes are priced apart (a draft model's catching up on a prompt is no row's cost).
  const auto started = Clock::now();
  drafter_seconds_ = 0;
  choose_tokens(stats);
  make_room(stats);
  encode_media();
  const int n = assemble_batch();
  if (n == 0) return stats;  // everything scheduled was preempted; the next step resumes it
  stats.n_tokens = n;
  for (const auto& s : running_) stats.n_sequences += s->n_scheduled > 0;
  model::Batch batch{.tokens = std::span(batch_tokens_).first(n),
                     .pos = std::span(batch_pos_).first(n),
                     .slot = std::span(batch_slot_).first(n),
                     .output = std::span(batch_output_).first(n)};
  // Requests under different adapters share the pass; without any it is the base model's.
  if (std::any_of(batch_adapter_.begin(), batch_adapter_.begin() + n,
                  [](int32_t a) { return a >= 0; })) {
    batch.adapter = std::span(batch_adapter_).first(n);
    batch.adapter_scale = std::span(batch_scale_).first(n);
  }
  if (batch_has_media_) {
    batch.embedded = std::span(batch_embedded_).first(n);
    batch.embeddings = engine_.media_rows().first(static_cast<size_t>(n) * engine_.spec().n_embd);
  }
  if (batch_sees_images_) {
    batch.attend_from = std::span(batch_from_).first(n);
    batch.attend_until = std::span(batch_until_).first(n);
  }
  const int k = selection_size(n);
  auto status =
      engine_.model().forward(batch, engine_.cache(),
                              {.logits = logits_.data(),
                               .top_k = k,
                               .top_ids = top_ids_.data(),
                               .top_logits = top_logits_.data(),
                               .hidden = hidden_rows_.empty() ? nullptr : hidden_rows_.data()});
  if (!status) {
    for (auto& s : running_) finish(*s, FinishReason::kError, status.error().message());
    running_.clear();
    return std::move(status).error();
  }
  // The tokens are in the cache: their complete blocks become reusable (drafts once kept).
  kv::Cache& cache = engine_.cache();
  for (auto& s : running_) {
    s->n_computed += s->n_scheduled;
    const int known = std::min(s->n_computed, static_cast<int>(s->tokens.size()));
    if (s->n_scheduled > 0) cache.commit(s->slot, s->cache_keys(), known, s->prefix_context);
  }
  sample(n, k);
  if (stats.n_prefill_tokens == 0)
    step_cost_.record(n, seconds(started, Clock::now()) - drafter_seconds_);
  // The K/V of rejected drafts stay in their cells, past the sequence's end: attention never
  // reads a position after its own, and the next steps write those positions again.
  for (auto& s : running_) {
    if (s->slot < 0 || s->draft.empty()) continue;
    s->draft_length.record(static_cast<int>(s->draft.size()), s->accepted);
    s->n_computed = static_cast<int>(s->tokens.size()) - 1;
    cache.commit(s->slot, s->cache_keys(), s->n_computed, s->prefix_context);
  }
  std::erase_if(running_, [](const auto& s) { return s->slot < 0; });
  return stats;
}

// The candidates per output row that every sampling in this step can pick from exactly (the
// largest over the rows), or 0 when some row needs whole logits: prompt logits, logprobs, a
// constraint, penalties or an unbounded top-k. Only that many leave a GPU.
int Scheduler::selection_size(int n_batch) const {
  int k = 0;
  for (int i = 0; i < n_batch; ++i) {
    const Sequence* seq = batch_owner_[i];
    if (seq == nullptr) continue;
    const int needed = seq->request.sampling.candidates_needed();
    if (seq->all_logits() || seq->logprobs || seq->request.constrain || needed == 0 ||
        needed > model::Outputs::kMaxTopK)
      return 0;
    k = std::max(k, needed);
  }
  return k;
}

std::vector<std::string> Scheduler::adapter_names(bool running) const {
  std::vector<std::string> names;
  auto add = [&](const Sequence& s) {
    if (s.adapter_slot >= 0) names.push_back(engine_.adapters().name_of(s.adapter_slot));
  };
  if (running) {
    for (const auto& s : running_) {
      if (s->slot >= 0) add(*s);
    }
  } else {
    for (const auto& s : waiting_) add(*s);
  }
  std::ranges::sort(names);
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::erase(names, std::string());
  return names;
}

std::vector<std::string> Scheduler::running_adapters() const {
  return adapter_names(true);
}
std::vector<std::string> Scheduler::waiting_adapters() const {
  return adapter_names(false);
}

util::Status run_until_idle(Scheduler& scheduler) {
  while (!scheduler.idle()) HR_TRY(scheduler.step());
  return {};
}

util::Result<std::vector<float>> prompt_logits(Engine& engine, std::span<const int32_t> ids,
                                               std::span<const mm::MediaSpan> media,
                                               const std::string& adapter) {
  const size_t n_vocab = engine.spec().n_vocab;
  std::vector<float> logits(ids.size() * n_vocab);
  std::string error;
  Request r;
  r.prompt.assign(ids.begin(), ids.end());
  r.adapter = adapter;
  r.media.assign(media.begin(), media.end());
  r.max_tokens = 0;
  r.reuse_prefix = false;
  r.prompt_logits = [&](int pos, std::span<const float> row) {
    std::copy(row.begin(), row.end(), logits.begin() + static_cast<ptrdiff_t>(pos * n_vocab));
  };
  r.on_done = [&](FinishReason, const RequestStats&, const std::string& e) { error = e; };
  Scheduler scheduler(engine);
  const SubmitResult submitted = scheduler.submit(std::move(r));
  if (submitted.refusal != Refusal::kNone) return util::Error(submitted.message);
  HR_TRY(run_until_idle(scheduler));
  if (!error.empty()) return util::Error(error);
  return logits;
}

}  // namespace engine
