// Which browser origins may call the API (see cors.h).
#include "server/cors.h"

#include <algorithm>

namespace server {

std::string CorsPolicy::allow_origin(const std::string& origin) const {
  if (origin.empty()) return {};
  if (std::find(origins_.begin(), origins_.end(), "*") != origins_.end()) return "*";
  return std::find(origins_.begin(), origins_.end(), origin) != origins_.end() ? origin
                                                                               : std::string();
}

}  // namespace server
