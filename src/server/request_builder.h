// server: a validated completion request made into the engine::Requests that run it, one per
// choice — the prompt's tokens (chat template rendered with tools and thinking), each choice's
// seed and constraint (response_format or forced tool calls), logit bias and banned tokens, the
// end tokens, the media (decoded and prepared here, on the request's worker), and callbacks
// feeding the choice's TokenChannel — and the engine's refusals made
// into API errors.
#pragma once

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "chat/reply.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "server/api.h"
#include "server/metrics.h"
#include "server/stream.h"
#include "tokenizer/tokenizer.h"

namespace server {

struct BuildContext {
  const tokenizer::Tokenizer& tokenizer;
  const std::string& chat_template;  // Jinja source for chat requests
  ServerMetrics& metrics;
  const engine::Engine& engine;  // what media are prepared for (its projector and limits)
};

struct BuiltRequest {
  std::vector<engine::Request> choices;                 // one per choice, in order
  std::vector<std::shared_ptr<TokenChannel>> channels;  // what each choice's callbacks feed
  chat::ReplyOptions reply;                             // how each reply is read back
};

// Structured output and forced tool calls fail closed: a schema the constraint cannot enforce is
// an error (code unsupported_response_format or unsupported_tool_schema).
std::variant<BuiltRequest, ApiError> build_engine_requests(const CompletionRequest& request,
                                                           const BuildContext& context);

// The API error for a request the scheduler refused (refusal is not kNone).
ApiError refusal_error(const engine::SubmitResult& submitted, bool chat);

// The errors_total type an API error is counted under: its code, else invalid_request.
std::string error_metric_type(const ApiError& error);

}  // namespace server
