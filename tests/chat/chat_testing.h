// Helpers for the chat tests: render a template string with JSON variables in one call.
#pragma once

#include <string>
#include <string_view>

#include "chat/template.h"

namespace chat_testing {

// Renders `source` with `variables`; returns the text, or "ERROR: <message>".
inline std::string render(
    std::string_view source,
    const nlohmann::ordered_json& variables = nlohmann::ordered_json::object(),
    const chat::EngineOptions& options = {}) {
  auto tmpl = chat::Template::parse(source);
  if (!tmpl) return "ERROR: " + tmpl.error().message();
  auto out = tmpl->render(variables, options);
  if (!out) return "ERROR: " + out.error().message();
  return *out;
}

inline bool is_error(const std::string& rendered) {
  return rendered.rfind("ERROR: ", 0) == 0;
}

}  // namespace chat_testing
