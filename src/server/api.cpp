// OpenAI request validation and response JSON.
#include "server/api.h"

#include <fmt/format.h>

#include <cmath>
#include <random>

namespace server {

using nlohmann::json;

json ApiError::to_json() const {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

ApiError invalid_field(const std::string& param, const std::string& message) {
  return ApiError{.status = 400, .message = message, .param = param};
}

namespace {

// Thrown inside parsing only, caught in parse_request: keeps each field check to one line.
struct FieldError {
  ApiError error;
};

[[noreturn]] void fail(const std::string& param, const std::string& what) {
  throw FieldError{invalid_field(param, fmt::format("'{}' {}", param, what))};
}

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const json& body, const char* name, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(name, fmt::format("must be a number between {} and {}", lo, hi));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) fail(name, fmt::format("must be between {} and {}, got {}", lo, hi, x));
  return x;
}

bool is_integer(const json& v) {
  if (v.is_number_integer()) return true;
  return v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>();
}

std::optional<int64_t> integer(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!is_integer(*v)) fail(name, fmt::format("must be an integer between {} and {}", lo, hi));
  const double x = v->get<double>();
  if (x < static_cast<double>(lo) || x > static_cast<double>(hi)) {
    fail(name, fmt::format("must be between {} and {}, got {}", lo, hi, x));
  }
  return v->is_number_unsigned() ? static_cast<int64_t>(v->get<uint64_t>()) : v->get<int64_t>();
}

std::optional<bool> boolean(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(name, "must be true or false");
  return v->get<bool>();
}

// Chat content: a string, or text parts [{"type":"text","text":…}] joined.
std::string message_content(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) fail(param, "must be a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string p = fmt::format("{}[{}]", param, i);
    if (!part.is_object() || part.value("type", json()) != "text") {
      fail(p, "must be a text part {\"type\":\"text\",\"text\":…}; this model reads text only");
    }
    if (!part.contains("text") || !part["text"].is_string()) fail(p + ".text", "must be a string");
    text += part["text"].get<std::string>();
  }
  return text;
}

nlohmann::ordered_json parse_messages(const json& body) {
  const json* m = field(body, "messages");
  if (!m) fail("messages", "is required");
  if (!m->is_array() || m->empty()) fail("messages", "must be a non-empty array of messages");
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!msg.is_object()) fail(p, "must be an object with 'role' and 'content'");
    const json* role = field(msg, "role");
    if (!role || !role->is_string()) fail(p + ".role", "must be a string");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    if (r != "system" && r != "user" && r != "assistant") {
      fail(p + ".role", fmt::format("must be system, developer, user or assistant, got '{}'", r));
    }
    const json* content = field(msg, "content");
    if (!content) fail(p + ".content", "is required");
    out.push_back({{"role", r}, {"content", message_content(*content, p + ".content")}});
  }
  return out;
}

std::vector<int32_t> token_array(const json& v, const std::string& param, int32_t n_vocab) {
  std::vector<int32_t> ids;
  for (const json& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
      fail(param, fmt::format("token ids must be integers in [0, {})", n_vocab));
    }
    ids.push_back(t.get<int32_t>());
  }
  return ids;
}

void parse_prompt(const json& body, CompletionRequest& r, int32_t n_vocab) {
  const json* p = field(body, "prompt");
  if (!p) fail("prompt", "is required");
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    return;
  }
  if (!p->is_array() || p->empty()) fail("prompt", "must be a string, an array of token ids, or a one-item array of either");
  if ((*p)[0].is_number()) {
    r.prompt_tokens = token_array(*p, "prompt", n_vocab);
    r.prompt_is_tokens = true;
    return;
  }
  if (p->size() > 1) fail("prompt", "holds several prompts; this server answers one prompt per request");
  if ((*p)[0].is_string()) {
    r.prompt_text = (*p)[0].get<std::string>();
  } else if ((*p)[0].is_array()) {
    r.prompt_tokens = token_array((*p)[0], "prompt[0]", n_vocab);
    r.prompt_is_tokens = true;
  } else {
    fail("prompt[0]", "must be a string or an array of token ids");
  }
}

void parse_stop(const json& body, CompletionRequest& r) {
  const json* s = field(body, "stop");
  if (!s) return;
  if (s->is_string()) {
    r.stop.push_back(s->get<std::string>());
    return;
  }
  if (!s->is_array() || s->size() > 4) fail("stop", "must be a string or an array of at most 4 strings");
  for (size_t i = 0; i < s->size(); ++i) {
    if (!(*s)[i].is_string()) fail(fmt::format("stop[{}]", i), "must be a string");
    r.stop.push_back((*s)[i].get<std::string>());
  }
}

void parse_logit_bias(const json& body, CompletionRequest& r, int32_t n_vocab) {
  const json* b = field(body, "logit_bias");
  if (!b) return;
  if (!b->is_object()) fail("logit_bias", "must be an object mapping token ids to biases");
  for (const auto& [key, value] : b->items()) {
    const std::string p = "logit_bias." + key;
    char* end = nullptr;
    const long id = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id >= n_vocab) {
      fail(p, fmt::format("names no token: keys must be token ids in [0, {})", n_vocab));
    }
    if (!value.is_number() || value.get<double>() < -100 || value.get<double>() > 100) {
      fail(p, "must be a number between -100 and 100");
    }
    r.logit_bias[static_cast<int32_t>(id)] = value.get<float>();
  }
}

void parse_logprobs(const json& body, CompletionRequest& r, bool chat) {
  if (chat) {
    r.logprobs = boolean(body, "logprobs").value_or(false);
    // Alternatives per position are not reported: refuse rather than answer without them.
    if (integer(body, "top_logprobs", 0, 20).value_or(0) > 0) {
      fail("top_logprobs", "is not supported: only the chosen tokens' logprobs are reported (use 0)");
    }
    return;
  }
  // Completions: logprobs is the number of alternatives; 0 gives the chosen tokens' logprobs.
  const auto n = integer(body, "logprobs", 0, 5);
  if (n && *n > 0) fail("logprobs", "above 0 is not supported: only the chosen tokens' logprobs are reported (use 0)");
  r.logprobs = n.has_value();
}

CompletionRequest parse(const json& body, bool chat, int32_t n_vocab) {
  if (!body.is_object()) throw FieldError{invalid_field("", "the request body must be a JSON object")};
  CompletionRequest r;
  r.chat = chat;
  if (const json* m = field(body, "model"); m && !m->is_string()) fail("model", "must be a string");
  if (chat) {
    r.messages = parse_messages(body);
  } else {
    parse_prompt(body, r, n_vocab);
    if (boolean(body, "echo").value_or(false)) fail("echo", "is not supported (use false)");
    if (const json* s = field(body, "suffix"); s && !(s->is_string() && s->get<std::string>().empty())) {
      fail("suffix", "is not supported");
    }
  }
  constexpr int64_t kMaxInt = 1 << 30;
  auto max_tokens = integer(body, "max_tokens", 1, kMaxInt);
  if (auto mct = integer(body, "max_completion_tokens", 1, kMaxInt)) max_tokens = mct;
  if (max_tokens) r.max_tokens = static_cast<int>(*max_tokens);
  if (integer(body, "n", 1, 128).value_or(1) != 1) fail("n", "must be 1: this server returns one choice per request");
  if (field(body, "tools") || field(body, "functions")) {
    fail(field(body, "tools") ? "tools" : "functions", "is not supported: this server does not call tools");
  }
  // OpenAI's defaults: temperature 1 and no top-k, top-p or min-p filtering.
  r.sampling.temperature = static_cast<float>(number(body, "temperature", 0, 2).value_or(1.0));
  r.sampling.top_p = static_cast<float>(number(body, "top_p", 0, 1).value_or(1.0));
  r.sampling.top_k = static_cast<int>(integer(body, "top_k", 0, kMaxInt).value_or(0));
  r.sampling.min_p = static_cast<float>(number(body, "min_p", 0, 1).value_or(0.0));
  r.sampling.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2, 2).value_or(0.0));
  r.sampling.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", -2, 2).value_or(0.0));
  r.sampling.repeat_penalty = static_cast<float>(number(body, "repeat_penalty", 0, 10).value_or(1.0));
  if (auto seed = integer(body, "seed", INT64_MIN, INT64_MAX)) {
    r.sampling.seed = static_cast<uint64_t>(*seed);
  } else {
    r.sampling.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  }
  parse_stop(body, r);
  parse_logit_bias(body, r, n_vocab);
  parse_logprobs(body, r, chat);
  r.stream = boolean(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) fail("stream_options", "must be an object");
    if (const json* iu = field(*so, "include_usage")) {
      if (!iu->is_boolean()) fail("stream_options.include_usage", "must be true or false");
      r.include_usage = iu->get<bool>();
    }
  }
  if (const json* rf = field(body, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
      fail("response_format", "must be an object with a string 'type' (text, json_object or json_schema)");
    }
    r.response_format = *rf;
  }
  return r;
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json logprobs_json(const ResponseHeader& h, const std::vector<TokenLogprob>* logprobs) {
  if (!logprobs) return nullptr;
  if (h.chat) {
    json content = json::array();
    for (const auto& t : *logprobs) {
      const std::vector<uint8_t> bytes(t.token.begin(), t.token.end());
      content.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes}, {"top_logprobs", json::array()}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), values = json::array();
  for (const auto& t : *logprobs) {
    tokens.push_back(t.token);
    values.push_back(t.logprob);
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", nullptr}, {"text_offset", nullptr}};
}

json base(const ResponseHeader& h, bool chunk) {
  return {{"id", h.id},
          {"object", h.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", h.created},
          {"model", h.model}};
}

}  // namespace

std::variant<CompletionRequest, ApiError> parse_request(const json& body, bool chat, int32_t n_vocab) {
  try {
    return parse(body, chat, n_vocab);
  } catch (const FieldError& e) {
    return e.error;
  } catch (const json::exception& e) {
    // A type error inside a nested value the checks above did not anticipate.
    return invalid_field("", fmt::format("the request has a field of the wrong type: {}", e.what()));
  }
}

json finish_reason_json(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop: return "stop";
    case engine::FinishReason::kLength: return "length";
    default: return nullptr;
  }
}

json completion_json(const ResponseHeader& h, const std::string& text, const std::vector<TokenLogprob>* logprobs,
                     engine::FinishReason reason, const Usage& usage) {
  json out = base(h, false);
  json choice = {{"index", 0}};
  if (h.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs_json(h, logprobs);
  choice["finish_reason"] = finish_reason_json(reason);
  out["choices"] = json::array({choice});
  out["usage"] = usage_json(usage);
  return out;
}

json chunk_json(const ResponseHeader& h, const std::string& text, bool role, const std::vector<TokenLogprob>* logprobs,
                engine::FinishReason reason) {
  json out = base(h, true);
  json choice = {{"index", 0}};
  if (h.chat) {
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (!text.empty() || role) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs_json(h, logprobs);
  choice["finish_reason"] = finish_reason_json(reason);
  out["choices"] = json::array({choice});
  return out;
}

json usage_chunk_json(const ResponseHeader& h, const Usage& usage) {
  json out = base(h, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return out;
}

}  // namespace server
