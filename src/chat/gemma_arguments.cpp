// Reading Gemma 4's argument syntax as JSON (see gemma_arguments.h).
#include "chat/gemma_arguments.h"

#include <fmt/format.h>

namespace chat {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

}  // namespace

void append_json_escaped(std::string& out, std::string_view bytes) {
  for (char c : bytes) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
}

bool GemmaArgumentReader::push(char byte, std::string& out) {
  const bool in_text = mode_ == kString || mode_ == kQuotedKey || mode_ == kBareKey;
  if (!allow_space_ && !in_text && is_space(byte)) return fail();
  switch (mode_) {
    case kValue:
      return value_byte(byte, out);
    case kScalar:
      if (byte == ',' || byte == '}' || byte == ']' || is_space(byte)) {
        mode_ = kAfterValue;
        return after_value_byte(byte, out);
      }
      if (byte == '<' || byte == '{' || byte == '[' || byte == ':' || byte == '"') return fail();
      out += byte;
      return true;
    case kAfterValue:
      return after_value_byte(byte, out);
    case kKey:
      return key_byte(byte, out);
    case kBareKey:
      if (byte == ':') {
        out += "\":";
        mode_ = kValue;
        return true;
      }
      if (byte == '{' || byte == '}' || byte == '[' || byte == ']' || byte == ',' || byte == '<')
        return fail();
      append_json_escaped(out, std::string_view(&byte, 1));
      return true;
    case kColon:
      if (is_space(byte)) {
        out += byte;
        return true;
      }
      if (byte != ':') return fail();
      out += ':';
      mode_ = kValue;
      return true;
    case kOpening:
      if (byte != kGemmaStringDelimiter[matched_]) return fail();
      if (++matched_ == kGemmaStringDelimiter.size()) mode_ = after_opening_;
      return true;
    case kString:
    case kQuotedKey:
      return string_byte(byte, out);
    case kDone:
    case kFailed:
      break;
  }
  return fail();
}

bool GemmaArgumentReader::value_byte(char byte, std::string& out) {
  if (nesting_.empty() && byte != '{') return fail();  // the arguments are one object
  if (is_space(byte)) {
    out += byte;
    return true;
  }
  const bool in_array = !nesting_.empty() && nesting_.back() == '[';
  switch (byte) {
    case '{':
    case '[':
      out += byte;
      nesting_ += byte;
      mode_ = byte == '{' ? kKey : kValue;
      first_ = true;
      return true;
    case ']':
      if (!(first_ && in_array)) return fail();
      close_container(byte, out);
      return true;
    case '<':
      out += '"';  // the grammar downstream hears of the string at its first byte
      mode_ = kOpening;
      matched_ = 1;
      after_opening_ = kString;
      first_ = false;
      return true;
    case '}':
    case ',':
    case ':':
    case '"':
      return fail();
    default:
      out += byte;
      mode_ = kScalar;
      first_ = false;
      return true;
  }
}

bool GemmaArgumentReader::after_value_byte(char byte, std::string& out) {
  if (is_space(byte)) {
    out += byte;
    return true;
  }
  const char open = nesting_.back();
  if (byte == ',') {
    out += ',';
    mode_ = open == '{' ? kKey : kValue;
    first_ = false;
    return true;
  }
  if ((byte == '}' && open == '{') || (byte == ']' && open == '[')) {
    close_container(byte, out);
    return true;
  }
  return fail();
}

bool GemmaArgumentReader::key_byte(char byte, std::string& out) {
  if (is_space(byte)) {
    out += byte;
    return true;
  }
  switch (byte) {
    case '}':
      if (!first_) return fail();  // a trailing comma
      close_container(byte, out);
      return true;
    case '<':
      out += '"';
      mode_ = kOpening;
      matched_ = 1;
      after_opening_ = kQuotedKey;
      first_ = false;
      return true;
    case '{':
    case '[':
    case ']':
    case ',':
    case ':':
    case '"':
      return fail();
    default:
      out += '"';
      append_json_escaped(out, std::string_view(&byte, 1));
      mode_ = kBareKey;
      first_ = false;
      return true;
  }
}

bool GemmaArgumentReader::string_byte(char byte, std::string& out) {
  if (!held_.empty()) {
    if (byte == kGemmaStringDelimiter[held_.size()]) {
      held_ += byte;
      if (held_.size() == kGemmaStringDelimiter.size()) {
        held_.clear();
        out += '"';
        mode_ = mode_ == kString ? kAfterValue : kColon;
      }
      return true;
    }
    // Not a delimiter after all: what was held is text.
    append_json_escaped(out, held_);
    held_.clear();
  }
  if (byte == '<') {
    held_.assign(1, '<');
    return true;
  }
  append_json_escaped(out, std::string_view(&byte, 1));
  return true;
}

void GemmaArgumentReader::close_container(char byte, std::string& out) {
  out += byte;
  nesting_.pop_back();
  first_ = false;
  mode_ = nesting_.empty() ? kDone : kAfterValue;
}

}  // namespace chat
