// The reasoning channel split from a model's output as it streams: Gemma 4's
// <|channel>thought\n…<channel|> (or <think>…</think>) becomes reasoning, the rest content.
// Byte-at-a-time safe: text that may be the start of a marker is held until it is known.
#pragma once

#include <string>
#include <string_view>

#include "chat/output_format.h"

namespace chat {

class ReasoningSplitter {
 public:
  // `starts_inside`: the prompt already opened the reasoning (a template whose generation prompt
  // ends with the open marker), so the output begins as reasoning.
  ReasoningSplitter(ReasoningMarkers markers, bool starts_inside);
  // Appends the settled reasoning and content of `text`. Whitespace just inside the close marker
  // and just after it is dropped (templates write "\n<channel|>", "</think>\n\n").
  void push(std::string_view text, std::string& reasoning, std::string& content);
  // The output ended; an unclosed channel's text is reasoning.
  void finish(std::string& reasoning, std::string& content);
  // Whether any byte of the last push was read inside a channel or its markers (for counting
  // reasoning tokens).
  bool last_push_touched_reasoning() const { return touched_; }

 private:
  enum State : unsigned char { kContent, kChannelName, kReasoning };
  void push_byte(char byte, std::string& reasoning, std::string& content);

  ReasoningMarkers markers_;
  State state_ = kContent;
  std::string held_;         // a possible marker
  std::string space_;        // in reasoning: whitespace not yet known to be inside the text
  bool block_empty_ = true;  // no reasoning text yet in this channel
  bool skip_space_ = false;  // right after a close marker
  bool touched_ = false;
};

}  // namespace chat
