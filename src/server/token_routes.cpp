// llama-server's /tokenize, /detokenize and /apply-template (see token_routes.h).
#include "server/token_routes.h"

#include <fmt/format.h>

#include "chat/unicode.h"
#include "server/chat_prompt.h"
#include "server/field_checks.h"

namespace server {
namespace {

RouteAnswer guarded(const std::function<RouteAnswer()>& route) {
  try {
    return route();
  } catch (const FieldError& e) {
    return invalid_field(e.param, e.message);
  } catch (const nlohmann::json::exception& e) {
    return invalid_field("",
                         fmt::format("the request has a field of the wrong type: {}", e.what()));
  }
}

void require_object(const Json& body) {
  if (!body.is_object()) throw FieldError{"", "the request body must be a JSON object"};
}

}  // namespace

RouteAnswer tokenize_route(const Json& body, const tokenizer::Tokenizer& tok) {
  return guarded([&]() -> RouteAnswer {
    require_object(body);
    const auto content = string(body, "content", "content");
    if (!content) fail("content", "is required: the text to tokenize");
    const bool add_special = boolean(body, "add_special").value_or(false);
    const bool parse_special = boolean(body, "parse_special").value_or(true);
    const bool with_pieces = boolean(body, "with_pieces").value_or(false);
    const auto ids = tok.encode(*content, {.add_bos = add_special, .parse_special = parse_special});
    nlohmann::json tokens = nlohmann::json::array();
    for (int32_t id : ids) {
      if (!with_pieces) {
        tokens.push_back(id);
        continue;
      }
      const std::string piece = tok.piece(id, /*render_special=*/true);
      nlohmann::json shown = chat::unicode::valid_utf8(piece, nullptr)
                                 ? nlohmann::json(piece)
                                 : nlohmann::json(std::vector<uint8_t>(piece.begin(), piece.end()));
      tokens.push_back({{"id", id}, {"piece", shown}});
    }
    return nlohmann::json{{"tokens", tokens}};
  });
}

RouteAnswer detokenize_route(const Json& body, const tokenizer::Tokenizer& tok) {
  return guarded([&]() -> RouteAnswer {
    require_object(body);
    const Json* tokens = field(body, "tokens");
    if (!tokens || !tokens->is_array()) fail("tokens", "is required: an array of token ids");
    std::vector<int32_t> ids;
    for (const Json& t : *tokens) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.n_vocab()) {
        fail("tokens", fmt::format("token ids must be integers in [0, {})", tok.n_vocab()));
      }
      ids.push_back(t.get<int32_t>());
    }
    // Bytes that do not form UTF-8 (a character cut between tokens) are shown as U+FFFD.
    tokenizer::StreamDecoder decoder(tok, /*render_special=*/true);
    std::string text;
    for (int32_t id : ids) text += decoder.push(id);
    text += decoder.flush();
    return nlohmann::json{{"content", text}};
  });
}

RouteAnswer apply_template_route(const Json& body, const tokenizer::Tokenizer& tok,
                                 const std::string& chat_template) {
  return guarded([&]() -> RouteAnswer {
    require_object(body);
    auto plan = plan_chat(parse_chat_request(body), tok, chat_template);
    if (auto* e = std::get_if<ApiError>(&plan)) return *e;
    return nlohmann::json{{"prompt", std::get<ChatPlan>(plan).prompt}};
  });
}

}  // namespace server
