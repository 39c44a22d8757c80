// libFuzzer target for JSON-schema compilation: the input is a schema's text (depth bounded as
// a request body is), compiled as response_format {"type":"json_schema"} against the stories260K
// vocabulary; a schema that compiles is run for a few tokens. Refusals are expected; crashes,
// leaks, hangs, escaping exceptions and sanitizer reports are findings.
#include <cstdint>
#include <string_view>

#include "fuzz_vocabulary.h"
#include "server/json_body.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::vocabulary();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = server::parse_json_body(text);
  auto* schema = std::get_if<nlohmann::ordered_json>(&parsed);
  if (!schema) return 0;
  nlohmann::ordered_json format = {{"type", "json_schema"}};
  format["json_schema"]["schema"] = *schema;
  fuzz::run_response_format(format, fuzz::vocabulary());
  return 0;
}
