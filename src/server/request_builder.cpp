// Completion request → engine::Requests (prompt tokens, constraints, callbacks); refusals → errors.
#include "server/request_builder.h"

#include <fmt/format.h>

#include <limits>
#include <optional>
#include <random>

#include "engine/media_prompt.h"
#include "sample/constraint.h"
#include "server/chat_prompt.h"

namespace server {

namespace {

// What every choice shares: the prompt and its media, how replies are read, what decoding obeys.
struct Prepared {
  std::vector<int32_t> prompt;
  std::vector<mm::MediaSpan> media;
  ChatPlan chat;  // completions: only the default reply options (text as it is) are used
};

// The conversation's media decoded and prepared for the engine, then placed where the template
// put their placeholders; errors name the content part (or the messages) at fault.
std::optional<ApiError> attach_media(const ChatRequest& c, const BuildContext& context,
                                     Prepared& p) {
  std::vector<std::shared_ptr<const mm::Media>> media;
  for (const MediaPart& part : c.media) {
    auto m = engine::prepare_media(
        context.engine, part.image ? mm::MediaKind::kImage : mm::MediaKind::kAudio, part.bytes,
        part.image_tokens ? part.image_tokens : c.image_tokens);
    if (!m) return invalid_field(part.param, m.error().message());
    media.push_back(std::move(*m));
  }
  engine::Request placed;
  if (auto s = engine::attach_media(placed, std::move(p.prompt), media, context.engine,
                                    context.tokenizer);
      !s) {
    return invalid_field("messages", s.error().message() +
                                         " (the chat template places a medium where a content "
                                         "part of type image_url or input_audio is)");
  }
  p.prompt = std::move(placed.prompt);
  p.media = std::move(placed.media);
  return std::nullopt;
}

std::variant<Prepared, ApiError> prepare(const CompletionRequest& r, const BuildContext& context) {
  const tokenizer::Tokenizer& tok = context.tokenizer;
  Prepared p;
  if (!r.chat) {
    // User text never becomes control tokens.
    p.prompt = r.prompt_is_tokens
                   ? r.prompt_tokens
                   : tok.encode(r.prompt_text, {.add_bos = true, .parse_special = false});
    return p;
  }
  auto plan = plan_chat(r.conversation, tok, context.chat_template);
  if (auto* e = std::get_if<ApiError>(&plan)) return *e;
  p.chat = std::move(std::get<ChatPlan>(plan));
  // The rendered template carries its special tokens as text; BOS is not doubled.
  p.prompt = tok.encode(p.chat.prompt, {.add_bos = true, .parse_special = true});
  if (!r.conversation.media.empty()) {
    if (auto e = attach_media(r.conversation, context, p)) return *e;
  }
  return p;
}

// A choice's own constraint (a constraint follows one sequence): the forced tool calls or the
// response_format; null for none.
std::variant<std::shared_ptr<sample::Constraint>, ApiError> choice_constraint(
    const CompletionRequest& r, const Prepared& p, const tokenizer::Tokenizer& tok) {
  if (p.chat.forced_calls) return forced_calls_constraint(p.chat, tok);
  if (r.response_format.is_null()) return nullptr;
  auto compiled = sample::compile_response_format(r.response_format, tok);
  if (!compiled) {
    ApiError e = invalid_field("response_format", compiled.error().message());
    e.code = "unsupported_response_format";
    return e;
  }
  return std::shared_ptr<sample::Constraint>(std::move(*compiled));
}

}  // namespace

std::variant<BuiltRequest, ApiError> build_engine_requests(const CompletionRequest& r,
                                                           const BuildContext& context) {
  auto prepared = prepare(r, context);
  if (auto* e = std::get_if<ApiError>(&prepared)) return *e;
  const Prepared& p = std::get<Prepared>(prepared);
  if (r.ignore_eos && (p.chat.forced_calls || !r.response_format.is_null())) {
    return invalid_field("ignore_eos",
                         "'ignore_eos' cannot be combined with response_format or a forced tool "
                         "call: their documents end");
  }
  // End tokens: the vocabulary's and the one that ends a reply of calls. With ignore_eos none
  // ends the reply and end-of-generation tokens are never sampled (llama-server's behaviour).
  std::vector<int32_t> end_ids = context.tokenizer.end_of_generation();
  end_ids.insert(end_ids.end(), p.chat.end_ids.begin(), p.chat.end_ids.end());
  std::vector<int32_t> banned = p.chat.banned_ids;
  if (r.ignore_eos) {
    banned.insert(banned.end(), end_ids.begin(), end_ids.end());
    end_ids.clear();
  }

  BuiltRequest built{.reply = p.chat.reply};
  // Call ids unique across the turns of a conversation, as clients keep them.
  built.reply.call_id_prefix = fmt::format("call_{:08x}_", std::random_device{}());
  for (int i = 0; i < r.n; ++i) {
    auto constraint = choice_constraint(r, p, context.tokenizer);
    if (auto* e = std::get_if<ApiError>(&constraint)) return *e;
    auto channel = std::make_shared<TokenChannel>(context.tokenizer, r.stop, end_ids, r.logprobs,
                                                  context.metrics);
    engine::Request request;
    request.prompt = p.prompt;
    request.media = p.media;
    request.max_tokens = r.max_tokens;
    request.sampling = r.sampling;
    request.sampling.seed = r.sampling.seed + static_cast<uint64_t>(i);  // n choices, n samples
    request.end_ids = end_ids;
    request.n_draft = r.draft;
    auto mask = std::get<std::shared_ptr<sample::Constraint>>(std::move(constraint));
    if (!r.logit_bias.empty() || !banned.empty() || mask) {
      request.constrain = [bias = r.logit_bias, banned, mask](std::span<float> logits,
                                                              std::span<const int32_t> generated) {
        for (const auto& [id, b] : bias) logits[id] += b;
        for (int32_t id : banned) logits[id] = -std::numeric_limits<float>::infinity();
        if (mask) mask->mask(logits, generated);
      };
    }
    // All run on the engine thread.
    if (r.logprobs) {
      request.n_top_logprobs = r.top_logprobs;
      request.on_logprobs = [channel](const sample::TokenLogprobs& l) { channel->on_logprobs(l); };
    }
    request.on_token = [channel](int32_t token, float) { return channel->on_token(token); };
    request.on_done = [channel](engine::FinishReason reason, const engine::RequestStats& stats,
                                const std::string& error) {
      channel->on_done(reason, stats, error);
    };
    built.choices.push_back(std::move(request));
    built.channels.push_back(std::move(channel));
  }
  return built;
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
    case engine::Refusal::kUnknownAdapter:  // unloaded since the request was read
      return ApiError{.status = 404,
                      .message = submitted.message + " (see /v1/models)",
                      .param = "model",
                      .code = "model_not_found"};
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
