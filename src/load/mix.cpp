// Prompt mix parsing (JSONL), request bodies and the weighted round-robin schedule.
#include "load/mix.h"

#include <cmath>
#include <fstream>
#include <sstream>

namespace load {

namespace {

util::Result<MixItem> parse_item(const nlohmann::json& j) {
  if (!j.is_object()) return util::Error("expected a JSON object");
  MixItem item;
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty())
    return util::Error("\"name\" must be a non-empty string");
  item.name = j["name"].get<std::string>();
  const bool has_messages = j.contains("messages"), has_prompt = j.contains("prompt");
  if (has_messages == has_prompt) return util::Error("give exactly one of \"messages\" or \"prompt\"");
  if (has_prompt) {
    if (!j["prompt"].is_string()) return util::Error("\"prompt\" must be a string");
    item.messages = nlohmann::json::array({{{"role", "user"}, {"content", j["prompt"]}}});
  } else {
    const auto& messages = j["messages"];
    if (!messages.is_array() || messages.empty())
      return util::Error("\"messages\" must be a non-empty array");
    for (const auto& m : messages) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content"))
        return util::Error("each message needs a string \"role\" and a \"content\"");
    }
    item.messages = messages;
  }
  if (j.contains("max_tokens")) {
    if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1 ||
        j["max_tokens"].get<int64_t>() > 1'000'000)
      return util::Error("\"max_tokens\" must be an integer from 1 to 1000000");
    item.max_tokens = j["max_tokens"].get<int>();
  }
  if (j.contains("response_format")) {
    if (!j["response_format"].is_object() || !j["response_format"].contains("type"))
      return util::Error("\"response_format\" must be an object with a \"type\"");
    item.response_format = j["response_format"];
  }
  if (j.contains("weight")) {
    if (!j["weight"].is_number() || !(j["weight"].get<double>() > 0) ||
        !std::isfinite(j["weight"].get<double>()))
      return util::Error("\"weight\" must be a number > 0");
    item.weight = j["weight"].get<double>();
  }
  for (const auto& [key, value] : j.items()) {
    static const char* known[] = {"name", "messages", "prompt", "max_tokens", "response_format",
                                  "weight"};
    bool found = false;
    for (const char* k : known) found = found || key == k;
    if (!found) return util::errorf("unknown field \"{}\"", key);
  }
  return item;
}

}  // namespace

util::Result<Mix> parse_mix(std::string_view text, std::string_view source) {
  Mix mix;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    auto where = [&](const std::string& what) {
      return util::errorf("{}:{}: {} (one JSON object per line: name, messages or prompt, "
                          "max_tokens, response_format, weight; see docs/load.md)",
                          source, number, what);
    };
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return where("not valid JSON");
    auto item = parse_item(j);
    if (!item) return where(item.error().message());
    for (const auto& other : mix.items) {
      if (other.name == item->name) return where(fmt::format("duplicate name \"{}\"", item->name));
    }
    mix.items.push_back(std::move(*item));
  }
  if (mix.items.empty()) return util::errorf("{}: the mix has no requests", source);
  return mix;
}

util::Result<Mix> read_mix(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return util::errorf("{}: cannot open the mix file", path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_mix(text.str(), path);
}

nlohmann::json request_body(const MixItem& item, const std::string& model, int default_max_tokens) {
  nlohmann::json body = {{"messages", item.messages},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}},
                         {"max_tokens", item.max_tokens > 0 ? item.max_tokens : default_max_tokens}};
  if (!model.empty()) body["model"] = model;
  if (!item.response_format.is_null()) body["response_format"] = item.response_format;
  return body;
}

MixSchedule::MixSchedule(const Mix& mix) {
  for (const auto& item : mix.items) {
    weights_.push_back(item.weight);
    total_ += item.weight;
  }
  current_.assign(weights_.size(), 0);
}

size_t MixSchedule::next() {
  std::lock_guard lock(mutex_);
  size_t best = 0;
  for (size_t i = 0; i < weights_.size(); ++i) {
    current_[i] += weights_[i];
    if (current_[i] > current_[best]) best = i;
  }
  current_[best] -= total_;
  return best;
}

}  // namespace load
