// Generated tokens to shown text (stop strings held back), that text to SSE chunks or JSON, and
// the response a connection pulls.
#include "server/stream.h"

#include <algorithm>

#include "server/json_body.h"

namespace server {

using nlohmann::json;

namespace {

std::string sse(const json& j) {
  return "data: " + dump_json(j) + "\n\n";
}

double seconds_between(engine::Clock::time_point a, engine::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

ApiError generation_failed(const std::string& error) {
  return ApiError{.status = 500, .message = "generation failed: " + error, .type = "server_error"};
}

// To its client a request the server cut is truncated, as by max_tokens.
engine::FinishReason shown_reason(engine::FinishReason reason) {
  return reason == engine::FinishReason::kCancelled ? engine::FinishReason::kLength : reason;
}

}  // namespace

TokenChannel::TokenChannel(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops,
                           std::vector<int32_t> end_ids, bool logprobs, ServerMetrics& metrics)
    : tokenizer_(tokenizer),
      logprobs_(logprobs),
      metrics_(metrics),
      end_ids_(std::move(end_ids)),
      decoder_(tokenizer),
      stop_(std::move(stops)) {}

void TokenChannel::on_logprobs(const sample::TokenLogprobs& l) {
  // Tokens as logprobs show them: their text with special tokens written out.
  logprob_ = {.token = tokenizer_.piece(l.chosen.id, true), .logprob = l.chosen.logprob};
  for (const auto& t : l.top) logprob_.top.emplace_back(tokenizer_.piece(t.id, true), t.logprob);
}

bool TokenChannel::on_token(int32_t token) {
  const engine::Clock::time_point now = engine::Clock::now();
  if (last_token_ != engine::Clock::time_point{})
    metrics_.inter_token.observe(seconds_between(last_token_, now));
  last_token_ = now;
  // The scheduler ends the request on an end token; it is not part of the text.
  if (std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end()) return true;
  std::string shown = stop_.push(decoder_.push(token));
  {
    std::lock_guard lock(mutex_);
    pending_.pieces.push_back(std::move(shown));
    if (logprobs_) pending_.logprobs.push_back(std::move(logprob_));
  }
  if (listener_) listener_();
  return !stop_.hit();
}

void TokenChannel::on_done(engine::FinishReason reason, const engine::RequestStats& stats,
                           const std::string& error) {
  std::string rest = stop_.push(decoder_.flush());
  rest += stop_.flush();
  metrics_.record_finished(reason, stats);
  {
    std::lock_guard lock(mutex_);
    pending_.rest = std::move(rest);
    pending_.done = true;
    pending_.reason = reason;
    pending_.stats = stats;
    pending_.error = error;
  }
  if (listener_) listener_();
}

Taken TokenChannel::take() {
  std::lock_guard lock(mutex_);
  Taken out;
  out.pieces.swap(pending_.pieces);
  out.logprobs.swap(pending_.logprobs);
  out.rest.swap(pending_.rest);
  out.done = pending_.done;
  out.reason = pending_.reason;
  out.stats = pending_.stats;
  out.error = pending_.error;
  return out;
}

bool TokenChannel::done() {
  std::lock_guard lock(mutex_);
  return pending_.done;
}

ResponseWriter::ResponseWriter(ResponseHeader header, bool stream, bool include_usage,
                               int n_choices, const chat::ReplyOptions& reply, bool logprobs)
    : header_(std::move(header)),
      stream_(stream),
      include_usage_(include_usage),
      finished_(n_choices, false) {
  for (int i = 0; i < n_choices; ++i) readers_.emplace_back(i, header_.chat, reply, logprobs);
}

std::string ResponseWriter::write(const std::vector<Taken>& taken) {
  std::vector<Choice> chunks;
  if (stream_ && header_.chat && !opened_) {
    for (const ChoiceReader& reader : readers_) chunks.push_back(reader.opening());
  }
  opened_ = true;
  bool all_done = true;
  const Taken* failed = nullptr;
  Usage usage;
  for (size_t i = 0; i < readers_.size(); ++i) {
    const Taken& t = taken[i];
    ChoiceReader& reader = readers_[i];
    for (size_t k = 0; k < t.pieces.size(); ++k) {
      reader.push(t.pieces[k], k < t.logprobs.size() ? &t.logprobs[k] : nullptr, chunks);
    }
    if (t.done && !finished_[i]) {
      reader.finish(shown_reason(t.reason), t.rest, chunks);
      finished_[i] = true;
    }
    all_done = all_done && t.done;
    if (t.reason == engine::FinishReason::kError) failed = &t;
    usage.prompt_tokens = t.stats.n_prompt;  // one prompt for every choice
    usage.cached_tokens = std::max(usage.cached_tokens, t.stats.n_cached);
    usage.completion_tokens += t.stats.n_generated;
    usage.reasoning_tokens += reader.reasoning_tokens();
    usage.accepted_prediction_tokens += t.stats.n_accepted;
    usage.rejected_prediction_tokens += t.stats.n_drafted - t.stats.n_accepted;
  }
  if (!stream_) {
    if (!all_done) return {};
    if (failed) return dump_json(generation_failed(failed->error).to_json());
    std::vector<Choice> whole;
    for (const ChoiceReader& reader : readers_) whole.push_back(reader.whole());
    return dump_json(completion_json(header_, whole, usage));
  }
  std::string out;
  for (const Choice& c : chunks) {
    if (failed && !c.finish_reason.is_null()) continue;  // a failed request ends with the error
    out += sse(chunk_json(header_, c));
  }
  if (!all_done) return out;
  if (failed) {
    out += sse(generation_failed(failed->error).to_json());
  } else if (include_usage_) {
    out += sse(usage_chunk_json(header_, usage));
  }
  out += "data: [DONE]\n\n";
  return out;
}

CompletionSource::CompletionSource(std::vector<std::shared_ptr<TokenChannel>> channels,
                                   ResponseWriter writer, std::function<void()> on_abandon)
    : channels_(std::move(channels)),
      writer_(std::move(writer)),
      on_abandon_(std::move(on_abandon)) {}

ResponseSource::Part CompletionSource::pull() {
  std::vector<Taken> taken;
  bool all_done = true, any_piece = false, none_started = true;
  for (const auto& channel : channels_) {
    taken.push_back(channel->take());
    all_done = all_done && taken.back().done;
    any_piece = any_piece || !taken.back().pieces.empty();
    none_started = none_started && taken.back().reason == engine::FinishReason::kCancelled &&
                   taken.back().stats.n_generated == 0;
  }
  Part part;
  if (started_) {
    part.more = writer_.write(taken);
    part.last = all_done;
    return part;
  }
  if (!all_done && (writer_.streaming() ? !any_piece : true)) {
    if (!writer_.streaming()) writer_.write(taken);  // the whole text is gathered until the end
    return part;
  }
  started_ = true;
  part.last = all_done;
  if (all_done && none_started) {
    // Cut by the server before it produced anything: nothing is lost by sending it elsewhere.
    const ApiError e{.status = 503,
                     .message = "the server stopped before this request started: retry it",
                     .type = "server_error",
                     .code = "draining"};
    part.start = HttpResponse{
        .status = 503, .headers = {{"Retry-After", "1"}}, .body = dump_json(e.to_json())};
    return part;
  }
  bool failed = false;
  for (const Taken& t : taken) failed = failed || t.reason == engine::FinishReason::kError;
  part.start = HttpResponse{
      .status = all_done && failed ? 500 : 200,
      .content_type = writer_.content_type(),
      .headers = writer_.streaming() ? HttpHeaders{{"Cache-Control", "no-cache"}} : HttpHeaders{},
      .body = writer_.write(taken),
      .chunked = writer_.streaming()};
  return part;
}

void CompletionSource::abandon() {
  auto on_abandon = std::exchange(on_abandon_, nullptr);
  bool all_done = true;
  for (const auto& channel : channels_) all_done = all_done && channel->done();
  if (on_abandon && !all_done) on_abandon();
}

}  // namespace server
