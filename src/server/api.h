// The OpenAI request and response shapes the server speaks: validation of request bodies (every
// error names its field), the error object, and the JSON of completions and stream chunks.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "chat/tool_calls.h"
#include "engine/request.h"
#include "sample/sampler.h"
#include "server/chat_request.h"

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

// One generated token for logprobs: its text, its log-probability under the model's own
// distribution, and the most likely alternatives (when asked for).
struct TokenLogprob {
  std::string token;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // most likely first
};

inline constexpr int kMaxChoices = 16;  // n: each choice is a sequence of its own

// A validated /v1/chat/completions or /v1/completions request.
struct CompletionRequest {
  bool chat = false;
  ChatRequest conversation;            // chat: messages, tools, thinking
  std::string prompt_text;             // completions: a text prompt ...
  std::vector<int32_t> prompt_tokens;  // ... or token ids (then prompt_text is empty)
  bool prompt_is_tokens = false;
  std::string model;                // as sent; empty when absent
  std::optional<float> lora_scale;  // headroom's: the adapter's scale for this request
  int n = 1;                        // choices, each sampled with its own seed
  int max_tokens = -1;              // -1: until an end token or the context is full
  // llama-server's "speculative.n_max": the most tokens drafted per step, at most the server's
  // --draft; 0 turns speculative decoding off for this request; -1: the server's.
  int draft = -1;
  sample::SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;     // alternatives per token (chat top_logprobs, completions logprobs)
  bool ignore_eos = false;  // llama-server's: end tokens are never sampled
  std::map<int32_t, float> logit_bias;
  nlohmann::ordered_json response_format;  // null when absent
};

// Validates a request body (parsed keeping key order: schemas are generated in the order they
// list properties). Unknown fields are ignored, as OpenAI's clients send extras; a known field
// with a wrong type or value, or a feature this server does not provide, is an error naming it.
std::variant<CompletionRequest, ApiError> parse_request(const nlohmann::ordered_json& body,
                                                        bool chat, int32_t n_vocab);

// The LoRA adapter a request runs under: "" for the model served (or when it names none), the
// adapter of that name among `adapters`; else 404 model_not_found naming what is served — or,
// with `any_model`, the base model. lora_scale without an adapter is a 400.
std::variant<std::string, ApiError> resolve_model(const CompletionRequest& request,
                                                  const std::string& served,
                                                  const std::vector<std::string>& adapters,
                                                  bool any_model);

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
  int cached_tokens = 0;     // prompt tokens reused from the prefix cache
  int reasoning_tokens = 0;  // chat: completion tokens spent in the reasoning channel
  // Speculative decoding, as OpenAI counts predicted outputs: drafted tokens kept and rejected.
  int accepted_prediction_tokens = 0;
  int rejected_prediction_tokens = 0;
};

// One choice of a response: the whole reply, or (in a stream chunk) what is new since the last.
struct Choice {
  int index = 0;
  bool role = false;                                  // chunk: the first chat chunk names the role
  std::string text;                                   // chat: content; completions: text
  std::string reasoning;                              // chat: reasoning_content
  std::vector<chat::ToolCall> tool_calls;             // whole responses
  std::vector<chat::ToolCallDelta> tool_call_deltas;  // chunks
  std::optional<std::vector<TokenLogprob>> logprobs;  // absent when not asked for
  nlohmann::json finish_reason;                       // null while unfinished
};

// "stop", "length", or "tool_calls" when the reply called tools; null while unfinished.
nlohmann::json finish_reason_json(engine::FinishReason reason, bool called_tools = false);

nlohmann::json completion_json(const ResponseHeader& header, const std::vector<Choice>& choices,
                               const Usage& usage);
nlohmann::json chunk_json(const ResponseHeader& header, const Choice& choice);
// The final chunk with stream_options.include_usage: no choices, only usage.
nlohmann::json usage_chunk_json(const ResponseHeader& header, const Usage& usage);

}  // namespace server
