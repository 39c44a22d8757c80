// Generated tokens to shown text (stop strings held back), that text to SSE chunks or JSON, and
// the response a connection pulls.
#include "server/stream.h"

#include <cmath>

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
                           bool logprobs, ServerMetrics& metrics)
    : tokenizer_(tokenizer),
      logprobs_(logprobs),
      metrics_(metrics),
      decoder_(tokenizer),
      stop_(std::move(stops)) {}

bool TokenChannel::on_token(int32_t token, float probability) {
  const engine::Clock::time_point now = engine::Clock::now();
  if (last_token_ != engine::Clock::time_point{})
    metrics_.inter_token.observe(seconds_between(last_token_, now));
  last_token_ = now;
  if (tokenizer_.is_end_of_generation(token)) return true;  // the scheduler ends the request
  std::string shown = stop_.push(decoder_.push(token));
  {
    std::lock_guard lock(mutex_);
    pending_.pieces.push_back(std::move(shown));
    if (logprobs_) pending_.logprobs.push_back({tokenizer_.piece(token), std::log(probability)});
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
    if (!rest.empty()) pending_.pieces.push_back(std::move(rest));
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
                               bool logprobs)
    : header_(std::move(header)),
      stream_(stream),
      include_usage_(include_usage),
      logprobs_(logprobs) {}

std::string ResponseWriter::write(const Taken& taken) {
  return stream_ ? write_stream(taken) : write_whole(taken);
}

std::string ResponseWriter::write_whole(const Taken& taken) {
  for (const std::string& piece : taken.pieces) text_ += piece;
  all_logprobs_.insert(all_logprobs_.end(), taken.logprobs.begin(), taken.logprobs.end());
  if (!taken.done) return {};
  if (taken.reason == engine::FinishReason::kError)
    return dump_json(generation_failed(taken.error).to_json());
  return dump_json(completion_json(header_, text_, logprobs_ ? &all_logprobs_ : nullptr,
                                   shown_reason(taken.reason),
                                   {taken.stats.n_prompt, taken.stats.n_generated, taken.stats.n_cached}));
}

std::string ResponseWriter::write_stream(const Taken& taken) {
  std::string out;
  if (header_.chat && !role_sent_) {
    out += sse(chunk_json(header_, "", true, nullptr, engine::FinishReason::kNone));
    role_sent_ = true;
  }
  // One chunk per token with text; a token whose text is held back passes its logprob on to the
  // next chunk.
  std::vector<TokenLogprob> pending;
  size_t next_logprob = 0;
  for (const std::string& piece : taken.pieces) {
    if (logprobs_ && next_logprob < taken.logprobs.size())
      pending.push_back(taken.logprobs[next_logprob++]);
    if (piece.empty()) continue;
    out += sse(chunk_json(header_, piece, false, logprobs_ ? &pending : nullptr,
                          engine::FinishReason::kNone));
    pending.clear();
  }
  while (logprobs_ && next_logprob < taken.logprobs.size())
    pending.push_back(taken.logprobs[next_logprob++]);
  if (!pending.empty())
    out += sse(chunk_json(header_, "", false, &pending, engine::FinishReason::kNone));
  if (!taken.done) return out;
  if (taken.reason == engine::FinishReason::kError) {
    out += sse(generation_failed(taken.error).to_json());
  } else {
    out += sse(chunk_json(header_, "", false, nullptr, shown_reason(taken.reason)));
    if (include_usage_)
      out += sse(usage_chunk_json(header_, {taken.stats.n_prompt, taken.stats.n_generated, taken.stats.n_cached}));
  }
  out += "data: [DONE]\n\n";
  return out;
}

CompletionSource::CompletionSource(std::shared_ptr<TokenChannel> channel, ResponseWriter writer,
                                   std::function<void()> on_abandon)
    : channel_(std::move(channel)),
      writer_(std::move(writer)),
      on_abandon_(std::move(on_abandon)) {}

ResponseSource::Part CompletionSource::pull() {
  Taken taken = channel_->take();
  Part part;
  if (started_) {
    part.more = writer_.write(taken);
    part.last = taken.done;
    return part;
  }
  if (!taken.done && (writer_.streaming() ? taken.pieces.empty() : true)) {
    if (!writer_.streaming()) writer_.write(taken);  // the whole text is gathered until the end
    return part;
  }
  started_ = true;
  part.last = taken.done;
  if (taken.done && taken.reason == engine::FinishReason::kCancelled &&
      taken.stats.n_generated == 0) {
    // Cut by the server before it produced anything: nothing is lost by sending it elsewhere.
    const ApiError e{.status = 503,
                     .message = "the server stopped before this request started: retry it",
                     .type = "server_error",
                     .code = "draining"};
    part.start = HttpResponse{
        .status = 503, .headers = {{"Retry-After", "1"}}, .body = dump_json(e.to_json())};
    return part;
  }
  const bool failed = taken.done && taken.reason == engine::FinishReason::kError;
  part.start = HttpResponse{
      .status = failed ? 500 : 200,
      .content_type = writer_.content_type(),
      .headers = writer_.streaming() ? HttpHeaders{{"Cache-Control", "no-cache"}} : HttpHeaders{},
      .body = writer_.write(taken),
      .chunked = writer_.streaming()};
  return part;
}

void CompletionSource::abandon() {
  auto on_abandon = std::exchange(on_abandon_, nullptr);
  if (on_abandon && !channel_->done()) on_abandon();
}

}  // namespace server
