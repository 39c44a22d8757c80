// Request body text → ordered JSON, or a 400 naming the problem.
#include "server/json_body.h"

#include <fmt/format.h>

namespace server {

std::variant<nlohmann::ordered_json, ApiError> parse_json_body(std::string_view body) {
  try {
    return nlohmann::ordered_json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    return invalid_field("", fmt::format("the request body is not valid JSON: {}", e.what()));
  }
}

}  // namespace server
