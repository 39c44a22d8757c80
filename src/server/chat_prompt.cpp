// Planning a chat request: template, reply reading, tool-call decoding (see chat_prompt.h).
#include "server/chat_prompt.h"

#include "chat/template.h"

namespace server {

std::variant<ChatPlan, ApiError> plan_chat(const ChatRequest& r, const tokenizer::Tokenizer& tok,
                                           const std::string& source) {
  const chat::OutputFormat format = chat::output_format_of(source);
  const bool has_tools = !r.tools.is_null();
  if (has_tools && format.tools == chat::ToolSyntax::kNone) {
    return invalid_field(
        "tools",
        "this model's chat template does not declare tools (it never reads 'tools'); serve it with "
        "--chat-template chatml, llama3 or a template that does");
  }
  ChatPlan plan;
  chat::RenderOptions render;
  render.bos_token = std::string(tok.token_text(tok.bos()));
  render.eos_token = std::string(tok.token_text(tok.eos()));
  if (has_tools) render.tools = r.tools;
  render.extra = r.template_variables;
  auto text = chat::apply_chat_template(source, r.messages, render);
  if (!text) return invalid_field("messages", text.error().message());
  plan.prompt = std::move(*text);

  const bool may_call = has_tools && r.tool_choice != ToolChoice::kNone;
  const bool forced =
      r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kFunction;
  plan.reply = {.format = format,
                .parse_tools = may_call,
                .eager_calls = forced,
                .starts_in_reasoning = chat::prompt_opens_reasoning(plan.prompt, format.reasoning)};
  if (!has_tools) return plan;

  if (const int32_t end = sample::marker_token(tok, chat::calls_end_marker(format.tools));
      end >= 0 && may_call) {
    plan.end_ids.push_back(end);
  }
  if (r.tool_choice == ToolChoice::kNone) {
    // The model sees the tools but cannot open a call.
    if (const int32_t open = sample::marker_token(tok, chat::call_open_marker(format.tools));
        open >= 0) {
      plan.banned_ids.push_back(open);
    }
    return plan;
  }
  if (!forced) return plan;
  sample::ToolCallSpec spec{.syntax = format.tools, .parallel = r.parallel_tool_calls};
  if (r.thinking) spec.reasoning = format.reasoning;
  for (const auto& tool : r.tools) {
    const auto& function = tool["function"];
    const std::string name = function["name"];
    if (r.tool_choice == ToolChoice::kFunction && name != r.tool_choice_name) continue;
    spec.functions.push_back(
        {name, function.contains("parameters") ? function["parameters"] : nullptr});
  }
  plan.forced_calls = std::move(spec);
  // Compiled once here so that a schema the grammar cannot enforce is refused before anything runs.
  auto compiled = forced_calls_constraint(plan, tok);
  if (auto* e = std::get_if<ApiError>(&compiled)) return *e;
  return plan;
}

std::variant<std::shared_ptr<sample::Constraint>, ApiError> forced_calls_constraint(
    const ChatPlan& plan, const tokenizer::Tokenizer& tokenizer) {
  if (!plan.forced_calls) return std::shared_ptr<sample::Constraint>();
  auto compiled = sample::compile_tool_calls(*plan.forced_calls, tokenizer);
  if (!compiled) {
    ApiError e = invalid_field("tools", compiled.error().message());
    e.code = "unsupported_tool_schema";
    return e;
  }
  return std::shared_ptr<sample::Constraint>(std::move(*compiled));
}

}  // namespace server
