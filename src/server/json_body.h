// server::parse_json_body — a request body's text to JSON, keeping key order (a response_format's
// properties are generated in the order the schema lists them), or the 400 that says why not:
// nesting deeper than kMaxJsonDepth is refused before parsing, so no body can exhaust the stack.
// server::dump_json — JSON text for a response that never throws on invalid UTF-8.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "server/api.h"

namespace server {

// Arrays and objects nested in a request body. Deep enough for any real schema (each level of a
// JSON schema is two), shallow enough that every recursive walk of the document stays small.
inline constexpr int kMaxJsonDepth = 64;

std::variant<nlohmann::ordered_json, ApiError> parse_json_body(std::string_view body);

// Bytes that are not UTF-8 (a client's, echoed in an error; a model's partial character) are
// replaced by U+FFFD instead of making the response fail.
std::string dump_json(const nlohmann::json& value);
std::string dump_json(const nlohmann::ordered_json& value);

}  // namespace server
