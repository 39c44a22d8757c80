// Splitting the reasoning channel from streamed output (see reasoning.h).
#include "chat/reasoning.h"

namespace chat {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Moves bytes from the front of `held` to `out` until `held` is again a prefix of `marker`.
template <class Sink>
void release_until_prefix(std::string& held, std::string_view marker, Sink&& out) {
  while (!held.empty() && !marker.starts_with(held)) {
    out(held.front());
    held.erase(0, 1);
  }
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(ReasoningMarkers markers, bool starts_inside)
    : markers_(std::move(markers)),
      state_(starts_inside && !markers_.empty() ? kReasoning : kContent) {}

void ReasoningSplitter::push(std::string_view text, std::string& reasoning, std::string& content) {
  touched_ = false;
  for (char byte : text) push_byte(byte, reasoning, content);
}

void ReasoningSplitter::push_byte(char byte, std::string& reasoning, std::string& content) {
  if (markers_.empty()) {
    content += byte;
    return;
  }
  auto close = [&] {
    held_.clear();
    space_.clear();
    state_ = kContent;
    skip_space_ = true;
  };
  switch (state_) {
    case kContent:
      if (skip_space_ && is_space(byte)) return;
      skip_space_ = false;
      held_ += byte;
      release_until_prefix(held_, markers_.open, [&](char c) { content += c; });
      if (held_ == markers_.open) {
        held_.clear();
        state_ = markers_.named_channel ? kChannelName : kReasoning;
        block_empty_ = true;
        touched_ = true;
      }
      return;
    case kChannelName:  // the channel's name, up to the end of its line, is not reasoning
      touched_ = true;
      held_ += byte;
      if (held_ == markers_.close) return close();
      release_until_prefix(held_, markers_.close, [](char) {});
      if (held_.empty() && byte == '\n') state_ = kReasoning;
      return;
    case kReasoning:
      touched_ = true;
      held_ += byte;
      release_until_prefix(held_, markers_.close, [&](char c) {
        if (is_space(c)) {
          if (!block_empty_) space_ += c;  // leading whitespace is dropped, trailing held
          return;
        }
        reasoning += space_;
        space_.clear();
        reasoning += c;
        block_empty_ = false;
      });
      if (held_ == markers_.close) close();
      return;
  }
}

void ReasoningSplitter::finish(std::string& reasoning, std::string& content) {
  if (state_ == kContent) content += held_;
  if (state_ == kReasoning && !held_.empty()) reasoning += space_ + held_;  // text, not a marker
  held_.clear();
  space_.clear();
}

}  // namespace chat
