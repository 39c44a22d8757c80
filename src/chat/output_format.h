// How a model writes tool calls and reasoning, read from its chat template: the markers the
// output parsers look for and the text a tool-call constraint makes the model write.
#pragma once

#include <string>
#include <string_view>

namespace chat {

enum class ToolSyntax {
  kNone,    // the template does not declare tools
  kGemma4,  // <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|> (spec §5.4)
  kHermes,  // <tool_call>\n{"name": NAME, "arguments": {…}}\n</tool_call> (chatml, Qwen, Hermes)
  kLlama3,  // {"name": NAME, "parameters": {…}} as the whole reply (Llama 3.1+)
};
std::string_view tool_syntax_name(ToolSyntax syntax);  // "gemma4", "hermes", "llama3", "none"

// Reasoning between two markers. Gemma 4 opens a named channel ("<|channel>thought\n…<channel|>")
// whose first line is the channel's name, not reasoning.
struct ReasoningMarkers {
  std::string open, close;
  bool named_channel = false;
  bool empty() const { return open.empty(); }
};

struct OutputFormat {
  ToolSyntax tools = ToolSyntax::kNone;
  ReasoningMarkers reasoning;  // empty: the template has no reasoning channel
};

// Recognises the format from markers in the template source (Gemma 4's <|tool_call>, Hermes'
// <tool_call>, Llama 3's "parameters" with <|python_tag|> or ipython) and whether the template
// reads `tools` at all; a template that never mentions `tools` gets ToolSyntax::kNone.
OutputFormat output_format_of(std::string_view template_source);

// The exact text of one call as the constrained decoder writes it: prefix(name), then the
// arguments object (JSON, or Gemma 4's argument syntax), then the suffix; calls after the first
// are preceded by the separator. The parser accepts this text and more (whitespace, quoted keys).
struct CallText {
  std::string prefix, suffix, separator;
  bool gemma_arguments = false;  // arguments in Gemma 4's syntax (chat/gemma_arguments.h)
  int max_calls = 0;             // in one reply; 0: any number
};
CallText call_text(ToolSyntax syntax, std::string_view name);

// The marker that opens a call; "" for kLlama3, whose calls are bare JSON.
std::string_view call_open_marker(ToolSyntax syntax);
// What the model writes after its calls to hand control back (Gemma 4's <|tool_response>, a stop
// token like end of turn); "" when end of turn does it.
std::string_view calls_end_marker(ToolSyntax syntax);

}  // namespace chat
