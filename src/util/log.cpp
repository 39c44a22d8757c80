// Logging to stderr: one line per message, serialized so lines from threads never interleave.
#include "util/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace util {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::mutex g_mutex;
}  // namespace

void set_log_level(LogLevel level) { g_level.store(level); }
LogLevel log_level() { return g_level.load(std::memory_order_relaxed); }

void log_line(LogLevel level, std::string_view message) {
  static constexpr const char* kTags[] = {"debug", "info", "warn", "error"};
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "headroom: %s: %.*s\n", kTags[static_cast<int>(level)],
               static_cast<int>(message.size()), message.data());
}

}  // namespace util
