// server::parse_json_body — a request body's text to JSON, keeping key order (a response_format's
// properties are generated in the order the schema lists them), or the 400 that says why not.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <variant>

#include "server/api.h"

namespace server {

std::variant<nlohmann::ordered_json, ApiError> parse_json_body(std::string_view body);

}  // namespace server
