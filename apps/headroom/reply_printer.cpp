// Printing a reply with its reasoning apart (see reply_printer.h).
#include "reply_printer.h"

#include <unistd.h>

#include <cstdio>

namespace cli {

ReplyPrinter::ReplyPrinter(const chat::OutputFormat& format, const std::string& prompt)
    : parser_({.format = format,
               .starts_in_reasoning = chat::prompt_opens_reasoning(prompt, format.reasoning)}),
      dim_(isatty(STDERR_FILENO) != 0) {}

void ReplyPrinter::push(const std::string& piece) {
  show(parser_.push(piece));
}

void ReplyPrinter::finish() {
  show(parser_.finish());
  if (in_reasoning_) std::fputs(dim_ ? "\033[0m\n" : "\n", stderr);
  in_reasoning_ = false;
}

void ReplyPrinter::show(const chat::ReplyDelta& d) {
  if (!d.reasoning.empty()) {
    if (!in_reasoning_) std::fputs(dim_ ? "\033[2mthinking: " : "thinking: ", stderr);
    in_reasoning_ = true;
    std::fputs(d.reasoning.c_str(), stderr);
    std::fflush(stderr);
  }
  if (!d.content.empty()) {
    if (in_reasoning_) std::fputs(dim_ ? "\033[0m\n" : "\n", stderr);
    in_reasoning_ = false;
    answer_ += d.content;
    std::fputs(d.content.c_str(), stdout);
    std::fflush(stdout);
  }
}

}  // namespace cli
