// server: what a chat request makes for the engine — the prompt rendered by the model's template
// (tools declared, thinking switched), how the reply is read back (reasoning, tool calls), and
// what decoding must obey (a forced call, a banned call marker, the token that ends a reply of
// calls).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "chat/reply.h"
#include "sample/constraint.h"
#include "sample/tool_constraint.h"
#include "server/api.h"
#include "tokenizer/tokenizer.h"

namespace server {

struct ChatPlan {
  std::string prompt;        // the rendered template
  chat::ReplyOptions reply;  // how the reply is read
  // tool_choice "required" or a function: the calls decoding is held to (compiled per choice).
  std::optional<sample::ToolCallSpec> forced_calls;
  std::vector<int32_t> banned_ids;  // tool_choice "none": the token that opens a call
  std::vector<int32_t> end_ids;     // besides end of generation: Gemma 4's <|tool_response>
};

// Renders and checks. Errors name the field: a template that cannot declare the tools, a tool
// schema the grammar cannot enforce (code unsupported_tool_schema), a render failure.
std::variant<ChatPlan, ApiError> plan_chat(const ChatRequest& request,
                                           const tokenizer::Tokenizer& tokenizer,
                                           const std::string& template_source);

// The constraint for one choice of a plan with forced calls (null without), or the 400 naming a
// schema feature the grammar cannot enforce (code unsupported_tool_schema).
std::variant<std::shared_ptr<sample::Constraint>, ApiError> forced_calls_constraint(
    const ChatPlan& plan, const tokenizer::Tokenizer& tokenizer);

}  // namespace server
