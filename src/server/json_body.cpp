// Request body text → ordered JSON (depth bounded first), or a 400 naming the problem; JSON text
// out that survives invalid UTF-8.
#include "server/json_body.h"

#include <fmt/format.h>

namespace server {

namespace {

// The deepest nesting of arrays and objects, counted without parsing (brackets inside strings
// do not count); stops counting past `limit`.
int nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

std::variant<nlohmann::ordered_json, ApiError> parse_json_body(std::string_view body) {
  if (nesting_depth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return invalid_field(
        "", fmt::format("the request body nests arrays and objects more than {} deep, the limit",
                        kMaxJsonDepth));
  }
  try {
    return nlohmann::ordered_json::parse(body);
  } catch (const nlohmann::json::exception&
               e) {  // parse_error, or out_of_range: a number past double's range
    // The parser quotes what it read last, which may be a whole long string: keep the start.
    std::string_view what = e.what();
    constexpr size_t kShown = 240;
    return invalid_field("", fmt::format("the request body is not valid JSON: {}{}",
                                         what.substr(0, kShown), what.size() > kShown ? "…" : ""));
  }
}

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dump_json(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace server
