// server: a validated completion request made into the engine::Request that runs it — the
// prompt's tokens (chat template rendered), the structured-output constraint and logit bias, and
// callbacks feeding a TokenChannel — and the engine's refusals made into API errors.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "engine/request.h"
#include "engine/scheduler.h"
#include "server/api.h"
#include "server/stream.h"
#include "tokenizer/tokenizer.h"

namespace server {

struct BuildContext {
  const tokenizer::Tokenizer& tokenizer;
  const std::string& chat_template;  // Jinja source for chat requests
};

// `body` is the request as parsed, keeping key order: a response_format's properties are
// generated in the order the schema lists them. Structured output fails closed: a format the
// constraint cannot enforce is an error (code unsupported_response_format).
std::variant<engine::Request, ApiError> build_engine_request(const CompletionRequest& request,
                                                             const nlohmann::ordered_json& body,
                                                             const BuildContext& context,
                                                             std::shared_ptr<TokenChannel> channel);

// The API error for a request the scheduler refused (refusal is not kNone).
ApiError refusal_error(const engine::SubmitResult& submitted, bool chat);

// The errors_total type an API error is counted under: its code, else invalid_request.
std::string error_metric_type(const ApiError& error);

}  // namespace server
