// Recognising a template's tool-call and reasoning format, and the text of a call in each.
#include "chat/output_format.h"

#include <nlohmann/json.hpp>

namespace chat {

std::string_view tool_syntax_name(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::kGemma4:
      return "gemma4";
    case ToolSyntax::kHermes:
      return "hermes";
    case ToolSyntax::kLlama3:
      return "llama3";
    case ToolSyntax::kNone:
      break;
  }
  return "none";
}

OutputFormat output_format_of(std::string_view source) {
  auto has = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
  OutputFormat f;
  if (has("tools")) {
    if (has("<|tool_call>")) {
      f.tools = ToolSyntax::kGemma4;
    } else if (has("<tool_call>")) {
      f.tools = ToolSyntax::kHermes;
    } else if (has("\"parameters\"") &&
               (has("<|python_tag|>") || has("ipython") || has("<|start_header_id|>"))) {
      f.tools = ToolSyntax::kLlama3;
    }
  }
  if (has("<|channel>")) {
    f.reasoning = {.open = "<|channel>", .close = "<channel|>", .named_channel = true};
  } else if (has("<think>") || has("</think>")) {
    f.reasoning = {.open = "<think>", .close = "</think>"};
  }
  return f;
}

CallText call_text(ToolSyntax syntax, std::string_view name) {
  const std::string quoted = nlohmann::json(std::string(name)).dump();
  switch (syntax) {
    case ToolSyntax::kGemma4:
      return {.prefix = "<|tool_call>call:" + std::string(name),
              .suffix = "<tool_call|>",
              .gemma_arguments = true};
    case ToolSyntax::kHermes:
      return {.prefix = "<tool_call>\n{\"name\": " + quoted + ", \"arguments\": ",
              .suffix = "}\n</tool_call>",
              .separator = "\n"};
    case ToolSyntax::kLlama3:
      // Llama 3.1's template renders one call per assistant message.
      return {
          .prefix = "{\"name\": " + quoted + ", \"parameters\": ", .suffix = "}", .max_calls = 1};
    case ToolSyntax::kNone:
      break;
  }
  return {};
}

std::string_view call_open_marker(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::kGemma4:
      return "<|tool_call>";
    case ToolSyntax::kHermes:
      return "<tool_call>";
    default:
      return "";
  }
}

std::string_view calls_end_marker(ToolSyntax syntax) {
  return syntax == ToolSyntax::kGemma4 ? "<|tool_response>" : "";
}

}  // namespace chat
