// How chat and run --think show a reply: the reasoning channel on stderr (dimmed on a terminal),
// the answer on stdout, as the tokens arrive.
#pragma once

#include <string>

#include "chat/reply.h"

namespace cli {

class ReplyPrinter {
 public:
  // `format` is the chat template's; `prompt` the rendered prompt (it may open the reasoning).
  ReplyPrinter(const chat::OutputFormat& format, const std::string& prompt);
  void push(const std::string& piece);
  void finish();
  const std::string& answer() const { return answer_; }

 private:
  void show(const chat::ReplyDelta& d);
  chat::ReplyParser parser_;
  std::string answer_;
  bool in_reasoning_ = false;  // the stderr line is open
  bool dim_;
};

}  // namespace cli
