// server: the chat-only parts of a request — messages with tool calls and tool results, the tools
// and how the model may use them, and the thinking switch — validated, each error naming its
// field, and shaped as chat templates read them.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/media_parts.h"

namespace server {

enum class ToolChoice { kAuto, kNone, kRequired, kFunction };

struct ChatRequest {
  // [{role, content, tool_calls?, tool_call_id?, name?, reasoning_content?}]: roles system, user,
  // assistant and tool ("developer" becomes "system"); content text (parts joined, null made ""),
  // or, for a user message with media, parts [{"type":"text","text"}, {"type":"image"},
  // {"type":"audio"}] as Gemma 4's template reads them; tool-call arguments parsed into objects,
  // as templates render them.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  std::vector<MediaPart> media;  // the media of the user messages, in order
  int image_tokens = 0;          // "image_tokens": each image's budget (0: the run's)
  nlohmann::ordered_json tools;  // the OpenAI function tools as sent, or null
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;  // kFunction: the function it must call
  bool parallel_tool_calls = true;
  // Variables for the template: chat_template_kwargs as sent, enable_thinking set from
  // reasoning_effort unless the kwargs set it.
  nlohmann::ordered_json template_variables = nlohmann::ordered_json::object();
  bool thinking = false;  // the resolved enable_thinking (off unless asked, as templates default)
};

// Reads messages, tools, tool_choice, parallel_tool_calls, chat_template_kwargs and
// reasoning_effort from a request body; throws FieldError (server/field_checks.h).
ChatRequest parse_chat_request(const nlohmann::ordered_json& body);

}  // namespace server
