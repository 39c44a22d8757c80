// Request field checks (see field_checks.h).
#include "server/field_checks.h"

#include <fmt/format.h>

#include <cmath>

namespace server {

void fail(const std::string& param, const std::string& what) {
  throw FieldError{param, fmt::format("'{}' {}", param, what)};
}

const Json* field(const Json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const Json& body, const char* name, double lo, double hi) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(name, fmt::format("must be a number between {} and {}", lo, hi));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    fail(name, fmt::format("must be between {} and {}, got {}", lo, hi, x));
  return x;
}

namespace {

bool is_integer(const Json& v) {
  if (v.is_number_integer()) return true;
  return v.is_number_float() && std::isfinite(v.get<double>()) &&
         std::floor(v.get<double>()) == v.get<double>();
}

}  // namespace

std::optional<int64_t> integer(const Json& body, const char* name, int64_t lo, int64_t hi) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!is_integer(*v)) fail(name, fmt::format("must be an integer between {} and {}", lo, hi));
  const double x = v->get<double>();
  if (x < static_cast<double>(lo) || x > static_cast<double>(hi)) {
    fail(name, fmt::format("must be between {} and {}, got {}", lo, hi, x));
  }
  return v->is_number_unsigned() ? static_cast<int64_t>(v->get<uint64_t>()) : v->get<int64_t>();
}

std::optional<bool> boolean(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(name, "must be true or false");
  return v->get<bool>();
}

std::optional<std::string> string(const Json& body, const char* name, const std::string& param) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail(param, "must be a string");
  return v->get<std::string>();
}

std::string text_part(const Json& part, const std::string& p) {
  if (!part.is_object() || part.value("type", Json()) != "text") {
    fail(p,
         "must be a text part {\"type\":\"text\",\"text\":…} (a user message may also carry "
         "image_url and input_audio parts)");
  }
  if (!part.contains("text") || !part["text"].is_string()) fail(p + ".text", "must be a string");
  return part["text"].get<std::string>();
}

std::string message_content(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) fail(param, "must be a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i)
    text += text_part(content[i], fmt::format("{}[{}]", param, i));
  return text;
}

}  // namespace server
