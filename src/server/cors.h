// server: CORS for browser clients, off unless --cors-origin names the origins (or "*") allowed
// to call the API from a web page.
#pragma once

#include <string>
#include <vector>

namespace server {

class CorsPolicy {
 public:
  explicit CorsPolicy(std::vector<std::string> origins) : origins_(std::move(origins)) {}
  bool enabled() const { return !origins_.empty(); }
  // The Access-Control-Allow-Origin value for a request from `origin`; empty: not allowed.
  std::string allow_origin(const std::string& origin) const;

  // What a preflight answer and every allowed response carry.
  static constexpr const char* kAllowMethods = "GET, POST, OPTIONS";
  static constexpr const char* kAllowHeaders = "Authorization, Content-Type";
  static constexpr const char* kMaxAgeSeconds = "600";

 private:
  std::vector<std::string> origins_;
};

}  // namespace server
