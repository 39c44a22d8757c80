// A progress bar for long file conversions (quantize, convert): one line per tensor, redrawn in
// place on a terminal, one plain line per finished tensor otherwise (logs, pipes).
#pragma once

#include <chrono>
#include <cstdio>

#include "convert/tensor_source.h"

namespace cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::FILE* out);
  // Draws the state of the write; finishing a tensor ends its line.
  void update(const convert::WriteProgress& p);

 private:
  std::FILE* out_;
  bool terminal_;
  size_t last_index_ = static_cast<size_t>(-1);
  int last_width_ = -1;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace cli
