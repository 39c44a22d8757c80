// server::TokenChannel, server::ResponseWriter and server::CompletionSource — how generated text
// travels from the engine thread to the connection, and the bytes the client receives: one SSE
// chunk per token that shows something (for each choice), or one JSON completion at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chat/reply.h"
#include "engine/request.h"
#include "server/api.h"
#include "server/choice_reader.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/stop.h"
#include "tokenizer/tokenizer.h"

namespace server {

// What the connection takes from a channel at once: everything new since the last take.
struct Taken {
  // Shown text, one piece per generated token (empty while a stop string or a partial UTF-8
  // character is held back), so a stream sends one chunk per token as OpenAI does.
  std::vector<std::string> pieces;
  std::vector<TokenLogprob> logprobs;  // one per piece, when asked for
  std::string rest;                    // at the end: text held back until then, no token of its own
  bool done = false;                   // the request ended: reason, stats and error are final
  engine::FinishReason reason = engine::FinishReason::kNone;
  engine::RequestStats stats;
  std::string error;
};

// One choice's channel: the engine thread pushes (on_logprobs, on_token, on_done), the connection
// takes.
class TokenChannel {
 public:
  // `end_ids` end the reply and are not shown (end of turn, Gemma 4's <|tool_response>).
  TokenChannel(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops,
               std::vector<int32_t> end_ids, bool logprobs, ServerMetrics& metrics);

  // Engine thread, before on_token when logprobs were asked for: the token's logprobs.
  void on_logprobs(const sample::TokenLogprobs& logprobs);
  // Engine thread: decodes the token, holds back what may become a stop string. Returns false
  // once a stop string matched (the request ends).
  bool on_token(int32_t token);
  // Engine thread, exactly once: flushes the held-back text and records the request's metrics.
  void on_done(engine::FinishReason reason, const engine::RequestStats& stats,
               const std::string& error);

  // Called on the engine thread after each push (the connection is then woken to take it). Set
  // before the request is submitted.
  void set_listener(std::function<void()> listener) { listener_ = std::move(listener); }

  // Connection side: everything new since the last take; whether the request has ended.
  Taken take();
  bool done();

 private:
  const tokenizer::Tokenizer& tokenizer_;
  const bool logprobs_;
  ServerMetrics& metrics_;
  // Engine thread only.
  const std::vector<int32_t> end_ids_;
  tokenizer::StreamDecoder decoder_;
  StopMatcher stop_;
  TokenLogprob logprob_;  // the latest token's
  engine::Clock::time_point last_token_;
  std::function<void()> listener_;
  // Shared, under mutex_.
  std::mutex mutex_;
  Taken pending_;
};

// Turns what was taken from each choice's channel into the bytes of the response body, each
// choice read back by a ChoiceReader (reasoning, content, tool calls; logprobs).
class ResponseWriter {
 public:
  ResponseWriter(ResponseHeader header, bool stream, bool include_usage, int n_choices,
                 const chat::ReplyOptions& reply, bool logprobs);

  // The bytes to send now (possibly none), from what was taken from each choice (in order). Once
  // every choice is done, the end of the response: the last chunks with finish_reason, the usage
  // chunk if asked and [DONE]; or the whole JSON completion. A request the server cut (cancelled
  // while its client listens: a drain's deadline) ends as truncated, finish_reason "length".
  std::string write(const std::vector<Taken>& taken);
  bool streaming() const { return stream_; }
  const char* content_type() const { return stream_ ? "text/event-stream" : "application/json"; }

 private:
  ResponseHeader header_;
  const bool stream_, include_usage_;
  std::vector<ChoiceReader> readers_;
  std::vector<bool> finished_;
  bool opened_ = false;
};

// One submitted completion's response, pulled by its connection: the head waits for the first
// generated text (or the end), so a request cut before it started still gets a retryable 503 and
// a failed one a 500.
class CompletionSource : public ResponseSource {
 public:
  // One channel per choice. `on_abandon`: the client went away first (cancel the requests).
  CompletionSource(std::vector<std::shared_ptr<TokenChannel>> channels, ResponseWriter writer,
                   std::function<void()> on_abandon);
  Part pull() override;
  void abandon() override;

 private:
  std::vector<std::shared_ptr<TokenChannel>> channels_;
  ResponseWriter writer_;
  std::function<void()> on_abandon_;
  bool started_ = false;
};

}  // namespace server
