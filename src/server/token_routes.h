// server: llama-server's utility routes — POST /tokenize, /detokenize and /apply-template — as
// functions of the request body, so the HTTP layer only routes. Field errors name the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "server/api.h"
#include "tokenizer/tokenizer.h"

namespace server {

using RouteAnswer = std::variant<nlohmann::json, ApiError>;

// {"content", "add_special"=false, "parse_special"=true, "with_pieces"=false} → {"tokens": [ids]}
// or [{"id","piece"}], a piece being a string when it is valid UTF-8 and its bytes otherwise.
RouteAnswer tokenize_route(const nlohmann::ordered_json& body,
                           const tokenizer::Tokenizer& tokenizer);
// {"tokens": [ids]} → {"content": text}, special tokens written out as llama-server does.
RouteAnswer detokenize_route(const nlohmann::ordered_json& body,
                             const tokenizer::Tokenizer& tokenizer);
// A chat request's messages (and tools, chat_template_kwargs, reasoning_effort) → {"prompt": the
// rendered template}, exactly what /v1/chat/completions would tokenize.
RouteAnswer apply_template_route(const nlohmann::ordered_json& body,
                                 const tokenizer::Tokenizer& tokenizer,
                                 const std::string& chat_template);

}  // namespace server
