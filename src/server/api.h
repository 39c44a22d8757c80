// The OpenAI request and response shapes the server speaks: validation of request bodies (every
// error names its field), the error object, and the JSON of completions and stream chunks.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/request.h"
#include "sample/sampler.h"

namespace server {

// {"error":{"message","type","param","code"}} with its HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field ("messages[1].content"), empty for none
  std::string code;   // e.g. "context_length_exceeded", empty for none
  nlohmann::json to_json() const;
};

ApiError invalid_field(const std::string& param, const std::string& message);

// One generated token for logprobs: its text and the log of the probability it was picked with.
struct TokenLogprob {
  std::string token;
  float logprob = 0;
};

// A validated /v1/chat/completions or /v1/completions request.
struct CompletionRequest {
  bool chat = false;
  nlohmann::ordered_json messages;     // chat: [{role, content}] with content as plain text
  std::string prompt_text;             // completions: a text prompt ...
  std::vector<int32_t> prompt_tokens;  // ... or token ids (then prompt_text is empty)
  bool prompt_is_tokens = false;
  int max_tokens = -1;                 // -1: until an end token or the context is full
  sample::SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  bool logprobs = false;
  std::map<int32_t, float> logit_bias;
  nlohmann::json response_format;      // null when absent
};

// Validates a request body. Unknown fields are ignored, as OpenAI's clients send extras; a known
// field with a wrong type or value, or a feature this server does not provide (n > 1, tools,
// top_logprobs), is an error naming the field.
std::variant<CompletionRequest, ApiError> parse_request(const nlohmann::json& body, bool chat, int32_t n_vocab);

// The pieces of a response that do not depend on the text.
struct ResponseHeader {
  std::string id;  // "chatcmpl-…" or "cmpl-…"
  int64_t created = 0;
  std::string model;
  bool chat = false;
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens reused from the prefix cache
};

// "stop", "length"; null while unfinished.
nlohmann::json finish_reason_json(engine::FinishReason reason);

nlohmann::json completion_json(const ResponseHeader& header, const std::string& text,
                               const std::vector<TokenLogprob>* logprobs, engine::FinishReason reason,
                               const Usage& usage);
// One streamed chunk: `text` and `logprobs` new since the last one; `role` on the first chat chunk;
// `reason` on the last.
nlohmann::json chunk_json(const ResponseHeader& header, const std::string& text, bool role,
                          const std::vector<TokenLogprob>* logprobs, engine::FinishReason reason);
// The final chunk with stream_options.include_usage: no choices, only usage.
nlohmann::json usage_chunk_json(const ResponseHeader& header, const Usage& usage);

}  // namespace server
