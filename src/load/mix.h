// The prompt mix of `headroom load`: requests read from JSONL and picked in a fixed weighted order.
#pragma once

#include <cstddef>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace load {

// One kind of request: a chat conversation sent as-is, at a share of the traffic given by weight.
struct MixItem {
  std::string name;
  nlohmann::json messages;         // the OpenAI "messages" array
  int max_tokens = 0;              // 0: the run's --max-tokens
  nlohmann::json response_format;  // null when absent
  double weight = 1;
};

struct Mix {
  std::vector<MixItem> items;
};

// Parses JSONL text (one object per line; blank lines and lines starting with # are skipped).
// `source` names the file in errors, which give the line number.
util::Result<Mix> parse_mix(std::string_view text, std::string_view source);
util::Result<Mix> read_mix(const std::string& path);

// The request body for one item: stream=true with usage reported in the last chunk.
nlohmann::json request_body(const MixItem& item, const std::string& model, int default_max_tokens);

// Picks items in a fixed interleaved order whose shares match the weights (smooth weighted
// round-robin), so two runs of the same mix send the same sequence. Thread-safe.
class MixSchedule {
 public:
  explicit MixSchedule(const Mix& mix);
  size_t next();

 private:
  std::mutex mutex_;
  std::vector<double> weights_, current_;
  double total_ = 0;
};

}  // namespace load
