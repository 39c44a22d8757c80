// server::StopMatcher — finds OpenAI `stop` strings in streamed text, holding back only the tail
// that could still become one, so a stop string is never shown, even split across tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Adds generated text; returns what may be shown now. Once a stop string appears, hit() is
  // true and neither it nor anything after it is ever returned.
  std::string push(std::string_view text);
  // The end of generation: the held-back tail can no longer become a stop string.
  std::string flush();
  bool hit() const { return hit_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool hit_ = false;
};

}  // namespace server
