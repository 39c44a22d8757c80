// ProgressBar: "[ 12/ 48] blk.1.attn_q.weight  F32 → Q4_K  [########............]  40%".
#include "progress_bar.h"

#include <unistd.h>

#include <string>

namespace cli {

namespace {
constexpr int kBarWidth = 20;
}

ProgressBar::ProgressBar(std::FILE* out)
    : out_(out),
      terminal_(::isatty(::fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(const convert::WriteProgress& p) {
  const int filled = static_cast<int>(p.fraction * kBarWidth + 0.5);
  const bool finished = p.fraction >= 1.0;
  if (!terminal_ && !finished) return;  // a log gets one line per tensor
  if (p.index == last_index_ && filled == last_width_ && !finished) return;
  last_index_ = p.index;
  last_width_ = filled;
  const std::string bar = std::string(static_cast<size_t>(filled), '#') +
                          std::string(static_cast<size_t>(kBarWidth - filled), '.');
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const auto from = tensor::dtype_name(p.tensor->type);
  const auto to = tensor::dtype_name(p.choice->type);
  std::fprintf(out_, "%s[%4zu/%4zu] %-36s %6.*s -> %-6.*s [%s] %3d%% %7.1fs", terminal_ ? "\r" : "",
               p.index + 1, p.count, p.tensor->name.c_str(), static_cast<int>(from.size()),
               from.data(), static_cast<int>(to.size()), to.data(), bar.c_str(),
               static_cast<int>(p.fraction * 100 + 0.5), seconds);
  if (finished)
    std::fprintf(out_, "%s%s\n", p.choice->why.empty() ? "" : "  ", p.choice->why.c_str());
  std::fflush(out_);
}

}  // namespace cli
