// server::TokenChannel and server::ResponseWriter — how generated text travels from the engine
// thread to the connection, and the bytes the client receives: one SSE chunk per token, or one
// JSON completion at the end.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/api.h"
#include "server/metrics.h"
#include "server/stop.h"
#include "tokenizer/tokenizer.h"

namespace server {

// What the connection takes from a channel at once: everything new since the last take.
struct Taken {
  // Shown text, one piece per generated token (empty while a stop string or a partial UTF-8
  // character is held back), so a stream sends one chunk per token as OpenAI does.
  std::vector<std::string> pieces;
  std::vector<TokenLogprob> logprobs;
  bool done = false;  // the request ended: reason, stats and error are final
  engine::FinishReason reason = engine::FinishReason::kNone;
  engine::RequestStats stats;
  std::string error;
};

// One request's channel: the engine thread pushes (on_token, on_done), the connection takes.
class TokenChannel {
 public:
  TokenChannel(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops, bool logprobs,
               ServerMetrics& metrics);

  // Engine thread: decodes the token, holds back what may become a stop string. Returns false
  // once a stop string matched (the request ends).
  bool on_token(int32_t token, float probability);
  // Engine thread, exactly once: flushes the held-back text and records the request's metrics.
  void on_done(engine::FinishReason reason, const engine::RequestStats& stats,
               const std::string& error);

  // Connection side: waits up to `wait` for something new, then takes it.
  Taken take(std::chrono::milliseconds wait);
  bool done();

 private:
  const tokenizer::Tokenizer& tokenizer_;
  const bool logprobs_;
  ServerMetrics& metrics_;
  // Engine thread only.
  tokenizer::StreamDecoder decoder_;
  StopMatcher stop_;
  engine::Clock::time_point last_token_;
  // Shared, under mutex_.
  std::mutex mutex_;
  std::condition_variable changed_;
  Taken pending_;
};

// Turns what was taken into the bytes of the response body.
class ResponseWriter {
 public:
  ResponseWriter(ResponseHeader header, bool stream, bool include_usage, bool logprobs);

  // The bytes to send now (possibly none). Once `taken.done`, the end of the response: the last
  // chunk with finish_reason, the usage chunk if asked and [DONE]; or the whole JSON completion.
  std::string write(const Taken& taken);
  const char* content_type() const { return stream_ ? "text/event-stream" : "application/json"; }

 private:
  std::string write_stream(const Taken& taken);
  std::string write_whole(const Taken& taken);

  ResponseHeader header_;
  const bool stream_, include_usage_, logprobs_;
  bool role_sent_ = false;
  std::string text_;  // not streaming: the whole text so far
  std::vector<TokenLogprob> all_logprobs_;
};

}  // namespace server
