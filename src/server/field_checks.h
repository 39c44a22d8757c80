// server: checks of request fields, each failure a FieldError naming the field ("max_tokens",
// "messages[1].content") and saying what it must be. Thrown inside request parsing only and
// turned into a 400 by parse_request, so each check stays one line.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace server {

struct FieldError {
  std::string param;
  std::string message;  // the whole message: "'param' must be …"
};

// Throws FieldError{param, "'param' what"}.
[[noreturn]] void fail(const std::string& param, const std::string& what);

using Json = nlohmann::ordered_json;

// The field, or null when absent or JSON null.
const Json* field(const Json& body, const char* name);
std::optional<double> number(const Json& body, const char* name, double lo, double hi);
std::optional<int64_t> integer(const Json& body, const char* name, int64_t lo, int64_t hi);
std::optional<bool> boolean(const Json& body, const char* name);
std::optional<std::string> string(const Json& body, const char* name, const std::string& param);

// Chat content: a string, or text parts [{"type":"text","text":…}] joined.
std::string message_content(const Json& content, const std::string& param);
// The text of one text part.
std::string text_part(const Json& part, const std::string& param);

}  // namespace server
