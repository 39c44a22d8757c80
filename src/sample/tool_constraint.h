// Decoding constrained to tool calls (tool_choice "required" or a named function): the reply is
// one or more calls to declared functions, written in the chat template's syntax
// (chat::call_text), each with arguments valid under its function's JSON schema. Fails closed
// like response_format: a schema the grammar cannot enforce is refused, naming the function and
// the feature.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/output_format.h"
#include "sample/constraint.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace sample {

struct ToolFunction {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON schema of an object; null: no arguments
};

struct ToolCallSpec {
  chat::ToolSyntax syntax = chat::ToolSyntax::kNone;
  std::vector<ToolFunction> functions;  // those the reply may call
  bool parallel = true;                 // more than one call in the reply
  chat::ReasoningMarkers reasoning;     // when set, a reasoning channel may come before the calls
};

util::Result<std::unique_ptr<Constraint>> compile_tool_calls(const ToolCallSpec& spec,
                                                             const tokenizer::Tokenizer& tokenizer);

// The one token whose text is `marker` (Gemma 4's <|tool_response>, <|tool_call>), or -1 when
// the vocabulary spells it with several or `marker` is empty.
int32_t marker_token(const tokenizer::Tokenizer& tokenizer, std::string_view marker);

}  // namespace sample
