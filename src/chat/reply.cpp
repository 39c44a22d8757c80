// Reading a reply: the reasoning splitter feeding the tool-call parser.
#include "chat/reply.h"

namespace chat {

bool prompt_opens_reasoning(std::string_view prompt, const ReasoningMarkers& markers) {
  if (markers.empty()) return false;
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' '))
    prompt.remove_suffix(1);
  return prompt.ends_with(markers.open);
}

ReplyParser::ReplyParser(ReplyOptions options)
    : reasoning_(options.format.reasoning, options.starts_in_reasoning),
      tools_({.syntax = options.parse_tools ? options.format.tools : ToolSyntax::kNone,
              .eager = options.eager_calls,
              .id_prefix = options.call_id_prefix}) {}

ReplyDelta ReplyParser::push(std::string_view text) {
  ReplyDelta d;
  std::string rest;
  reasoning_.push(text, d.reasoning, rest);
  tools_.push(rest, d.content, d.tool_calls);
  return d;
}

ReplyDelta ReplyParser::finish() {
  ReplyDelta d;
  std::string rest;
  reasoning_.finish(d.reasoning, rest);
  tools_.push(rest, d.content, d.tool_calls);
  tools_.finish(d.content);
  return d;
}

}  // namespace chat
