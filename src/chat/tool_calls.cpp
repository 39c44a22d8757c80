// Reading tool calls back from streamed output (see tool_calls.h).
#include "chat/tool_calls.h"

#include <nlohmann/json.hpp>

namespace chat {
namespace {

constexpr std::string_view kCallKeyword = "call:";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

std::string_view close_marker(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::kGemma4:
      return "<tool_call|>";
    case ToolSyntax::kHermes:
      return "</tool_call>";
    default:
      return "";
  }
}

}  // namespace

ToolCallParser::ToolCallParser(ToolCallParserOptions options)
    : options_(std::move(options)),
      open_(call_open_marker(options_.syntax)),
      close_(close_marker(options_.syntax)) {}

void ToolCallParser::push(std::string_view text, std::string& content,
                          std::vector<ToolCallDelta>& deltas) {
  for (char byte : text) push_byte(byte, content, deltas);
}

void ToolCallParser::push_byte(char byte, std::string& content,
                               std::vector<ToolCallDelta>& deltas) {
  if (state_ == kText) return text_byte(byte, content);
  held_ += byte;
  bool failed = false;
  call_byte(byte, deltas, failed);
  if (!failed) return;
  // The call's text up to here is content; the byte that broke it is read again as text (it may
  // open the next call).
  held_.pop_back();
  give_up(content);
  text_byte(byte, content);
}

void ToolCallParser::text_byte(char byte, std::string& content) {
  if (options_.syntax == ToolSyntax::kLlama3) {
    // A Llama 3 call is the reply itself: a JSON object after nothing but whitespace.
    if (at_start_ && is_space(byte)) {
      held_ += byte;
      return;
    }
    if (at_start_ && byte == '{') {
      held_ += byte;
      start_call();
      json_ = "{";
      depth_ = 1;
      return;
    }
    at_start_ = false;
    content += held_;
    held_.clear();
    content += byte;
    return;
  }
  if (open_.empty()) {
    content += byte;
    return;
  }
  // Whitespace between calls (Hermes writes a newline) or after the last one is not content.
  if (after_call_ && held_.empty() && is_space(byte)) {
    space_ += byte;
    return;
  }
  held_ += byte;
  while (!held_.empty() && !open_.starts_with(held_)) {
    flush_space(content);
    content += held_.front();
    held_.erase(0, 1);
  }
  if (held_ == open_) {
    space_.clear();
    start_call();
  }
}

void ToolCallParser::flush_space(std::string& content) {
  content += space_;
  space_.clear();
  after_call_ = false;
}

void ToolCallParser::start_call() {
  state_ = options_.syntax == ToolSyntax::kGemma4 ? kCallWord : kJson;
  matched_ = 0;
  current_ = ToolCall{.id = options_.id_prefix + std::to_string(calls_.size())};
  header_sent_ = false;
  reader_ = GemmaArgumentReader();
  json_.clear();
  depth_ = 0;
  in_string_ = escaped_ = false;
}

void ToolCallParser::call_byte(char byte, std::vector<ToolCallDelta>& deltas, bool& failed) {
  switch (state_) {
    case kText:
      return;
    case kCallWord:
      if (byte != kCallKeyword[matched_]) {
        failed = true;
      } else if (++matched_ == kCallKeyword.size()) {
        state_ = kName;
      }
      return;
    case kName:
      if (byte == '{' && !current_.name.empty()) {
        state_ = kArguments;
        if (options_.eager) emit_header(deltas);
        std::string json;
        reader_.push(byte, json);
        emit_arguments(std::move(json), deltas);
      } else if (is_name_char(byte)) {
        current_.name += byte;
      } else {
        failed = true;
      }
      return;
    case kArguments: {
      std::string json;
      if (!reader_.push(byte, json)) {
        failed = true;
        return;
      }
      emit_arguments(std::move(json), deltas);
      if (reader_.complete()) {
        state_ = kClose;
        matched_ = 0;
      }
      return;
    }
    case kJson:
      if (depth_ == 0) {  // whitespace may come before the object
        if (byte == '{') {
          depth_ = 1;
          json_ = "{";
        } else if (!is_space(byte)) {
          failed = true;
        }
        return;
      }
      json_ += byte;
      if (in_string_) {
        if (escaped_) {
          escaped_ = false;
        } else if (byte == '\\') {
          escaped_ = true;
        } else if (byte == '"') {
          in_string_ = false;
        }
        return;
      }
      if (byte == '"') in_string_ = true;
      if (byte == '{' || byte == '[') ++depth_;
      if ((byte == '}' || byte == ']') && --depth_ == 0) {
        if (!close_.empty()) {
          state_ = kClose;
          matched_ = 0;
        } else if (!settle_json_call()) {
          failed = true;
        } else {
          finish_call(deltas);
        }
      }
      return;
    case kClose:
      if (matched_ == 0 && options_.syntax != ToolSyntax::kGemma4 && is_space(byte)) return;
      if (byte != close_[matched_]) {
        failed = true;
      } else if (++matched_ == close_.size()) {
        if (options_.syntax != ToolSyntax::kGemma4 && !settle_json_call()) {
          failed = true;
        } else {
          finish_call(deltas);
        }
      }
      return;
  }
}

// Reads a JSON call {"name": …, "arguments"|"parameters": {…}} into current_.
bool ToolCallParser::settle_json_call() {
  nlohmann::json call = nlohmann::json::parse(json_, nullptr, /*allow_exceptions=*/false);
  if (!call.is_object()) return false;
  auto name = call.find("name");
  auto arguments = call.find("arguments");
  if (arguments == call.end()) arguments = call.find("parameters");
  if (name == call.end() || !name->is_string() || name->get<std::string>().empty() ||
      arguments == call.end()) {
    return false;
  }
  nlohmann::json args = *arguments;
  if (args.is_string()) args = nlohmann::json::parse(args.get<std::string>(), nullptr, false);
  if (!args.is_object()) return false;
  current_.name = name->get<std::string>();
  current_.arguments = args.dump();
  return true;
}

void ToolCallParser::finish_call(std::vector<ToolCallDelta>& deltas) {
  if (!header_sent_) {
    emit_header(deltas);
    deltas.push_back({.index = static_cast<int>(calls_.size()), .arguments = current_.arguments});
  }
  calls_.push_back(std::move(current_));
  state_ = kText;
  held_.clear();
  at_start_ = true;
  after_call_ = true;
}

void ToolCallParser::emit_header(std::vector<ToolCallDelta>& deltas) {
  deltas.push_back(
      {.index = static_cast<int>(calls_.size()), .id = current_.id, .name = current_.name});
  header_sent_ = true;
}

void ToolCallParser::emit_arguments(std::string piece, std::vector<ToolCallDelta>& deltas) {
  const int index = static_cast<int>(calls_.size());
  if (header_sent_ && !piece.empty()) {
    // Pieces read in one push go out as one delta.
    if (!deltas.empty() && deltas.back().index == index && deltas.back().name.empty()) {
      deltas.back().arguments += piece;
    } else {
      deltas.push_back({.index = index, .arguments = piece});
    }
  }
  current_.arguments += piece;
}

void ToolCallParser::give_up(std::string& content) {
  malformed_ = true;
  flush_space(content);
  content += held_;
  held_.clear();
  state_ = kText;
  at_start_ = false;
}

void ToolCallParser::finish(std::string& content) {
  if (state_ == kText) {
    // Held text is content, unless it is Llama 3's whitespace before a call that never came.
    const bool only_space = options_.syntax == ToolSyntax::kLlama3 && at_start_;
    if (!held_.empty() && !only_space) {
      flush_space(content);
      content += held_;
    }
    held_.clear();
    space_.clear();
    return;
  }
  if (options_.eager && header_sent_) {  // cut short (max_tokens): the call stays, partial
    calls_.push_back(std::move(current_));
    held_.clear();
    state_ = kText;
    return;
  }
  give_up(content);
}

}  // namespace chat
