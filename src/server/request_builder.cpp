// Completion request → engine::Request (prompt tokens, constraint, callbacks); refusals → errors.
#include "server/request_builder.h"

#include <fmt/format.h>

#include "chat/template.h"
#include "sample/constraint.h"

namespace server {

namespace {

// The prompt tokens of a validated request, or the error naming the field that made it fail.
std::variant<std::vector<int32_t>, ApiError> prompt_tokens(const CompletionRequest& r,
                                                           const BuildContext& context) {
  const tokenizer::Tokenizer& tok = context.tokenizer;
  if (!r.chat) {
    if (r.prompt_is_tokens) return r.prompt_tokens;
    // User text never becomes control tokens.
    return tok.encode(r.prompt_text, {.add_bos = true, .parse_special = false});
  }
  chat::RenderOptions render;
  render.bos_token = std::string(tok.token_text(tok.bos()));
  render.eos_token = std::string(tok.token_text(tok.eos()));
  auto text = chat::apply_chat_template(context.chat_template, r.messages, render);
  if (!text) return invalid_field("messages", text.error().message());
  // The rendered template carries its special tokens as text; BOS is not doubled.
  return tok.encode(*text, {.add_bos = true, .parse_special = true});
}

std::variant<std::shared_ptr<sample::Constraint>, ApiError> compile_constraint(
    const CompletionRequest& r, const nlohmann::ordered_json& body,
    const tokenizer::Tokenizer& tok) {
  if (r.response_format.is_null()) return nullptr;
  auto compiled = sample::compile_response_format(body.at("response_format"), tok);
  if (!compiled) {
    ApiError e = invalid_field("response_format", compiled.error().message());
    e.code = "unsupported_response_format";
    return e;
  }
  return std::shared_ptr<sample::Constraint>(std::move(*compiled));
}

}  // namespace

std::variant<engine::Request, ApiError> build_engine_request(
    const CompletionRequest& r, const nlohmann::ordered_json& body, const BuildContext& context,
    std::shared_ptr<TokenChannel> channel) {
  auto prompt = prompt_tokens(r, context);
  if (auto* e = std::get_if<ApiError>(&prompt)) return *e;
  auto constraint = compile_constraint(r, body, context.tokenizer);
  if (auto* e = std::get_if<ApiError>(&constraint)) return *e;

  engine::Request request;
  request.prompt = std::move(std::get<std::vector<int32_t>>(prompt));
  request.max_tokens = r.max_tokens;
  request.sampling = r.sampling;
  request.end_ids = context.tokenizer.end_of_generation();
  auto mask = std::get<std::shared_ptr<sample::Constraint>>(std::move(constraint));
  if (!r.logit_bias.empty() || mask) {
    request.constrain = [bias = r.logit_bias, mask](std::span<float> logits,
                                                    std::span<const int32_t> generated) {
      for (const auto& [id, b] : bias) logits[id] += b;
      if (mask) mask->mask(logits, generated);
    };
  }
  // Both run on the engine thread.
  request.on_token = [channel](int32_t token, float probability) {
    return channel->on_token(token, probability);
  };
  request.on_done = [channel](engine::FinishReason reason, const engine::RequestStats& stats,
                              const std::string& error) { channel->on_done(reason, stats, error); };
  return request;
}

ApiError refusal_error(const engine::SubmitResult& submitted, bool chat) {
  const std::string prompt_field = chat ? "messages" : "prompt";
  switch (submitted.refusal) {
    case engine::Refusal::kContextExceeded: {
      ApiError e = invalid_field(prompt_field, submitted.message);
      e.code = "context_length_exceeded";
      return e;
    }
    case engine::Refusal::kQueueFull:
      return ApiError{.status = 503,
                      .message = "the server is busy: " + submitted.message,
                      .type = "server_error",
                      .code = "queue_full"};
    case engine::Refusal::kInvalid:
    case engine::Refusal::kNone:
      break;
  }
  return invalid_field(prompt_field, submitted.message);
}

std::string error_metric_type(const ApiError& error) {
  return error.code.empty() ? "invalid_request" : error.code;
}

}  // namespace server
