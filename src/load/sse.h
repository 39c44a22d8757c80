// Incremental parser of an OpenAI chat-completions SSE stream: which chunks carry tokens, usage,
// the end marker, and what makes a stream malformed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace load {

// What one `data:` event of the stream said.
struct StreamEvent {
  enum class Kind { kTokens, kEmpty, kDone, kError, kMalformed };
  Kind kind = Kind::kEmpty;
  int64_t completion_tokens = -1;  // from "usage" when this event carries it
  int64_t prompt_tokens = -1;
  int64_t cached_tokens = -1;  // usage.prompt_tokens_details.cached_tokens (the prefix cache)
  std::string detail;  // the error message (kError) or what is wrong (kMalformed)
};

// Interprets one event's data: a chunk whose choices[0].delta has non-empty content (or
// reasoning_content, or tool_calls) is kTokens; "[DONE]" is kDone; {"error": …} is kError.
StreamEvent interpret_event(std::string_view data);

// Splits bytes into events at blank lines (LF or CRLF), joining multi-line data fields and
// ignoring comments and other fields, however the bytes are cut into reads.
class SseParser {
 public:
  // Feeds bytes; calls on_data(std::string_view data) for each complete event with data.
  template <class OnData>
  void feed(std::string_view bytes, OnData&& on_data) {
    buffer_.append(bytes);
    size_t line_start = 0;
    for (size_t newline; (newline = buffer_.find('\n', line_start)) != std::string::npos;
         line_start = newline + 1) {
      std::string_view line(buffer_.data() + line_start, newline - line_start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) {
        if (has_data_) on_data(std::string_view(data_));
        data_.clear();
        has_data_ = false;
      } else {
        take_line(line);
      }
    }
    buffer_.erase(0, line_start);
  }
  // Bytes received after the last complete line (a stream should end with none).
  bool has_partial_event() const { return has_data_ || !buffer_.empty(); }

 private:
  void take_line(std::string_view line);
  std::string buffer_, data_;
  bool has_data_ = false;
};

}  // namespace load
