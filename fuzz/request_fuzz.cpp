// libFuzzer target for what a client controls in a completion request: the body's text through
// parse_json_body (depth bound, UTF-8) and parse_request (chat and text completions: messages
// with tool calls, tools, tool_choice), then a response_format or forced tool calls compiled
// against the stories260K vocabulary and run for a few tokens, and any text through dump_json. Errors are expected; crashes, leaks, hangs, exceptions that escape and
// sanitizer reports are findings.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_vocabulary.h"
#include "server/api.h"
#include "server/json_body.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::vocabulary();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const tokenizer::Tokenizer& tok = fuzz::vocabulary();
  // Whatever the bytes, a response carrying them serializes.
  (void)server::dump_json(nlohmann::json(std::string(body)));
  auto parsed = server::parse_json_body(body);
  if (auto* error = std::get_if<server::ApiError>(&parsed)) {
    (void)server::dump_json(error->to_json());
    return 0;
  }
  const auto& document = std::get<nlohmann::ordered_json>(parsed);
  for (const bool chat : {false, true}) {
    auto request = server::parse_request(document, chat, tok.n_vocab());
    if (auto* error = std::get_if<server::ApiError>(&request)) {
      (void)server::dump_json(error->to_json());
      continue;
    }
    const auto& r = std::get<server::CompletionRequest>(request);
    if (!r.response_format.is_null()) fuzz::run_response_format(r.response_format, tok);
    const auto choice = r.conversation.tool_choice;
    if (!r.conversation.tools.is_null() &&
        (choice == server::ToolChoice::kRequired || choice == server::ToolChoice::kFunction))
      fuzz::run_tool_calls(r.conversation.tools, tok);
  }
  return 0;
}
