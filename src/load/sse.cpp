// SSE framing and the meaning of each chat-completions chunk.
#include "load/sse.h"

#include <nlohmann/json.hpp>

namespace load {

void SseParser::take_line(std::string_view line) {
  if (line.front() == ':') return;  // a comment (keep-alive)
  const auto colon = line.find(':');
  if (line.substr(0, colon) != "data") return;  // event:, id:, retry: change nothing we measure
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

namespace {

bool non_empty_string(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() && !j[key].get_ref<const std::string&>().empty();
}

}  // namespace

StreamEvent interpret_event(std::string_view data) {
  StreamEvent event;
  if (data == "[DONE]") {
    event.kind = StreamEvent::Kind::kDone;
    return event;
  }
  const auto j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  auto malformed = [&](std::string what) {
    event.kind = StreamEvent::Kind::kMalformed;
    event.detail = std::move(what);
    return event;
  };
  if (j.is_discarded()) return malformed("a data event is not JSON");
  if (!j.is_object()) return malformed("a data event is not a JSON object");
  if (j.contains("error")) {
    event.kind = StreamEvent::Kind::kError;
    const auto& e = j["error"];
    event.detail = e.is_object() && e.contains("message") && e["message"].is_string()
                       ? e["message"].get<std::string>()
                       : e.dump();
    return event;
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
      event.completion_tokens = u["completion_tokens"].get<int64_t>();
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
      event.prompt_tokens = u["prompt_tokens"].get<int64_t>();
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object()) {
      const auto& d = u["prompt_tokens_details"];
      if (d.contains("cached_tokens") && d["cached_tokens"].is_number_integer())
        event.cached_tokens = d["cached_tokens"].get<int64_t>();
    }
  }
  if (!j.contains("choices") || !j["choices"].is_array())
    return malformed("a chunk has no \"choices\" array");
  if (j["choices"].empty()) return event;  // the usage-only chunk
  const auto& choice = j["choices"][0];
  if (!choice.is_object()) return malformed("a choice is not an object");
  if (!choice.contains("delta")) return event;
  const auto& delta = choice["delta"];
  if (!delta.is_object()) return malformed("a choice's \"delta\" is not an object");
  if (non_empty_string(delta, "content") || non_empty_string(delta, "reasoning_content") ||
      (delta.contains("tool_calls") && delta["tool_calls"].is_array() &&
       !delta["tool_calls"].empty()))
    event.kind = StreamEvent::Kind::kTokens;
  return event;
}

}  // namespace load
