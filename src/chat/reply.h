// A model's reply read as it streams: reasoning first (reasoning.h), then content and tool calls
// (tool_calls.h) from what is left.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/output_format.h"
#include "chat/reasoning.h"
#include "chat/tool_calls.h"

namespace chat {

struct ReplyDelta {
  std::string reasoning, content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct ReplyOptions {
  OutputFormat format;
  bool parse_tools = false;  // read calls (the request declared tools and may call them)
  bool eager_calls = false;  // see ToolCallParserOptions::eager
  bool starts_in_reasoning = false;
  std::string call_id_prefix = "call_";
};

// Whether a rendered prompt leaves the model inside the reasoning channel (it ends with the open
// marker, as DeepSeek-R1-style templates do).
bool prompt_opens_reasoning(std::string_view prompt, const ReasoningMarkers& markers);

class ReplyParser {
 public:
  explicit ReplyParser(ReplyOptions options);
  ReplyDelta push(std::string_view text);
  ReplyDelta finish();
  // Whether the last push read anything inside the reasoning channel (a reasoning token).
  bool last_push_was_reasoning() const { return reasoning_.last_push_touched_reasoning(); }
  const std::vector<ToolCall>& calls() const { return tools_.calls(); }
  bool saw_malformed_call() const { return tools_.saw_malformed(); }

 private:
  ReasoningSplitter reasoning_;
  ToolCallParser tools_;
};

}  // namespace chat
