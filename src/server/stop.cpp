// Stop strings over a text stream: earliest match wins; the longest possible partial match waits.
#include "server/stop.h"

#include <algorithm>
#include <utility>

namespace server {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopMatcher::push(std::string_view text) {
  if (hit_) return "";
  held_ += text;
  size_t first = std::string::npos;
  for (const auto& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    hit_ = true;
    std::string shown = held_.substr(0, first);
    held_.clear();
    return shown;
  }
  // Keep the longest tail of held_ that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& stop : stops_) {
    for (size_t k = std::min(stop.size() - 1, held_.size()); k > keep; --k) {
      if (held_.compare(held_.size() - k, k, stop, 0, k) == 0) {
        keep = k;
        break;
      }
    }
  }
  std::string shown = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return shown;
}

std::string StopMatcher::flush() {
  if (hit_) return "";
  return std::exchange(held_, "");
}

}  // namespace server
