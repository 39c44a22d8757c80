// OpenAI request validation and response JSON.
#include "server/api.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "plan/planner.h"
#include "sample/logprobs.h"
#include "server/field_checks.h"

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

std::vector<int32_t> token_array(const Json& v, const std::string& param, int32_t n_vocab) {
  std::vector<int32_t> ids;
  for (const Json& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
      fail(param, fmt::format("token ids must be integers in [0, {})", n_vocab));
    }
    ids.push_back(t.get<int32_t>());
  }
  return ids;
}

void parse_prompt(const Json& body, CompletionRequest& r, int32_t n_vocab) {
  const Json* p = field(body, "prompt");
  if (!p) fail("prompt", "is required");
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    return;
  }
  if (!p->is_array() || p->empty())
    fail("prompt", "must be a string, an array of token ids, or a one-item array of either");
  if ((*p)[0].is_number()) {
    r.prompt_tokens = token_array(*p, "prompt", n_vocab);
    r.prompt_is_tokens = true;
    return;
  }
  if (p->size() > 1)
    fail("prompt", "holds several prompts; this server answers one prompt per request");
  if ((*p)[0].is_string()) {
    r.prompt_text = (*p)[0].get<std::string>();
  } else if ((*p)[0].is_array()) {
    r.prompt_tokens = token_array((*p)[0], "prompt[0]", n_vocab);
    r.prompt_is_tokens = true;
  } else {
    fail("prompt[0]", "must be a string or an array of token ids");
  }
}

void parse_stop(const Json& body, CompletionRequest& r) {
  const Json* s = field(body, "stop");
  if (!s) return;
  if (s->is_string()) {
    r.stop.push_back(s->get<std::string>());
    return;
  }
  if (!s->is_array() || s->size() > 4)
    fail("stop", "must be a string or an array of at most 4 strings");
  for (size_t i = 0; i < s->size(); ++i) {
    if (!(*s)[i].is_string()) fail(fmt::format("stop[{}]", i), "must be a string");
    r.stop.push_back((*s)[i].get<std::string>());
  }
}

void parse_logit_bias(const Json& body, CompletionRequest& r, int32_t n_vocab) {
  const Json* b = field(body, "logit_bias");
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

void parse_logprobs(const Json& body, CompletionRequest& r, bool chat) {
  if (chat) {
    r.logprobs = boolean(body, "logprobs").value_or(false);
    r.top_logprobs =
        static_cast<int>(integer(body, "top_logprobs", 0, sample::kMaxTopLogprobs).value_or(0));
    if (r.top_logprobs > 0 && !r.logprobs) fail("top_logprobs", "needs 'logprobs': true");
    return;
  }
  // Completions: logprobs is the number of alternatives; 0 gives the chosen tokens' logprobs.
  const auto n = integer(body, "logprobs", 0, sample::kMaxTopLogprobs);
  r.logprobs = n.has_value();
  r.top_logprobs = static_cast<int>(n.value_or(0));
}

CompletionRequest parse(const Json& body, bool chat, int32_t n_vocab) {
  if (!body.is_object()) throw FieldError{"", "the request body must be a JSON object"};
  CompletionRequest r;
  r.chat = chat;
  r.model = string(body, "model", "model").value_or("");
  if (const auto scale = number(body, "lora_scale", -100, 100))
    r.lora_scale = static_cast<float>(*scale);
  if (chat) {
    r.conversation = parse_chat_request(body);
  } else {
    parse_prompt(body, r, n_vocab);
    if (boolean(body, "echo").value_or(false)) fail("echo", "is not supported (use false)");
    if (const Json* s = field(body, "suffix");
        s && !(s->is_string() && s->get<std::string>().empty())) {
      fail("suffix", "is not supported");
    }
    if (field(body, "tools")) fail("tools", "belongs to /v1/chat/completions");
  }
  constexpr int64_t kMaxInt = 1 << 30;
  auto max_tokens = integer(body, "max_tokens", 1, kMaxInt);
  if (auto mct = integer(body, "max_completion_tokens", 1, kMaxInt)) max_tokens = mct;
  if (max_tokens) r.max_tokens = static_cast<int>(*max_tokens);
  r.n = static_cast<int>(integer(body, "n", 1, kMaxChoices).value_or(1));
  r.draft = static_cast<int>(
      integer(body, "speculative.n_max", 0, plan::Request::kMaxDraft).value_or(-1));
  // OpenAI's defaults: temperature 1 and no top-k, top-p or min-p filtering.
  r.sampling.temperature = static_cast<float>(number(body, "temperature", 0, 2).value_or(1.0));
  r.sampling.top_p = static_cast<float>(number(body, "top_p", 0, 1).value_or(1.0));
  r.sampling.top_k = static_cast<int>(integer(body, "top_k", 0, kMaxInt).value_or(0));
  r.sampling.min_p = static_cast<float>(number(body, "min_p", 0, 1).value_or(0.0));
  r.sampling.presence_penalty =
      static_cast<float>(number(body, "presence_penalty", -2, 2).value_or(0.0));
  r.sampling.frequency_penalty =
      static_cast<float>(number(body, "frequency_penalty", -2, 2).value_or(0.0));
  r.sampling.repeat_penalty =
      static_cast<float>(number(body, "repeat_penalty", 0, 10).value_or(1.0));
  if (auto seed = integer(body, "seed", INT64_MIN, INT64_MAX)) {
    r.sampling.seed = static_cast<uint64_t>(*seed);
  } else {
    r.sampling.seed =
        (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  }
  parse_stop(body, r);
  parse_logit_bias(body, r, n_vocab);
  parse_logprobs(body, r, chat);
  r.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  r.stream = boolean(body, "stream").value_or(false);
  if (const Json* so = field(body, "stream_options")) {
    if (!so->is_object()) fail("stream_options", "must be an object");
    if (const Json* iu = field(*so, "include_usage")) {
      if (!iu->is_boolean()) fail("stream_options.include_usage", "must be true or false");
      r.include_usage = iu->get<bool>();
    }
  }
  if (const Json* rf = field(body, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
      fail("response_format",
           "must be an object with a string 'type' (text, json_object or json_schema)");
    }
    r.response_format = *rf;
    if ((*rf)["type"] != "text" && r.conversation.tool_choice != ToolChoice::kAuto &&
        r.conversation.tool_choice != ToolChoice::kNone) {
      fail("response_format", "cannot be combined with a tool_choice that forces a call");
    }
  }
  return r;
}

json bytes_of(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

json usage_json(const Usage& u, bool chat) {
  json out = {{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  json details = {{"accepted_prediction_tokens", u.accepted_prediction_tokens},
                  {"rejected_prediction_tokens", u.rejected_prediction_tokens}};
  if (chat) details["reasoning_tokens"] = u.reasoning_tokens;
  out["completion_tokens_details"] = details;
  return out;
}

json logprobs_json(const ResponseHeader& h,
                   const std::optional<std::vector<TokenLogprob>>& logprobs) {
  if (!logprobs) return nullptr;
  if (h.chat) {
    json content = json::array();
    for (const auto& t : *logprobs) {
      json top = json::array();
      for (const auto& [token, logprob] : t.top) {
        top.push_back({{"token", token}, {"logprob", logprob}, {"bytes", bytes_of(token)}});
      }
      content.push_back({{"token", t.token},
                         {"logprob", t.logprob},
                         {"bytes", bytes_of(t.token)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), values = json::array(), tops = json::array();
  bool any_top = false;
  for (const auto& t : *logprobs) {
    tokens.push_back(t.token);
    values.push_back(t.logprob);
    json top = json::object();
    for (const auto& [token, logprob] : t.top) {
      if (!top.contains(token))
        top[token] = logprob;  // two ids may share a text; the likelier one stays
    }
    any_top = any_top || !t.top.empty();
    tops.push_back(top);
  }
  return {{"tokens", tokens},
          {"token_logprobs", values},
          {"top_logprobs", any_top ? tops : json(nullptr)},
          {"text_offset", nullptr}};
}

json tool_call_json(const chat::ToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

json base(const ResponseHeader& h, bool chunk) {
  return {{"id", h.id},
          {"object",
           h.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", h.created},
          {"model", h.model}};
}

}  // namespace

std::variant<CompletionRequest, ApiError> parse_request(const Json& body, bool chat,
                                                        int32_t n_vocab) {
  try {
    return parse(body, chat, n_vocab);
  } catch (const FieldError& e) {
    return invalid_field(e.param, e.message);
  } catch (const Json::exception& e) {
    // A type error inside a nested value the checks above did not anticipate.
    return invalid_field("",
                         fmt::format("the request has a field of the wrong type: {}", e.what()));
  }
}

std::variant<std::string, ApiError> resolve_model(const CompletionRequest& request,
                                                  const std::string& served,
                                                  const std::vector<std::string>& adapters,
                                                  bool any_model) {
  std::string adapter;
  if (std::find(adapters.begin(), adapters.end(), request.model) != adapters.end()) {
    adapter = request.model;
  } else if (!request.model.empty() && request.model != served && !any_model) {
    std::string listed = fmt::format("'{}'", served);
    for (const std::string& a : adapters) listed += fmt::format(", '{}'", a);
    return ApiError{.status = 404,
                    .message = fmt::format(
                        "the model '{}' does not exist: this server serves {} (see /v1/models)",
                        request.model, listed),
                    .param = "model",
                    .code = "model_not_found"};
  }
  if (adapter.empty() && request.lora_scale) {
    return invalid_field("lora_scale",
                         fmt::format("scales a LoRA adapter, but '{}' is the base model — name an "
                                     "adapter in 'model' (see /v1/models)",
                                     served));
  }
  return adapter;
}

json finish_reason_json(engine::FinishReason reason, bool called_tools) {
  switch (reason) {
    case engine::FinishReason::kStop:
      return called_tools ? "tool_calls" : "stop";
    case engine::FinishReason::kLength:
      return "length";
    default:
      return nullptr;
  }
}

json completion_json(const ResponseHeader& h, const std::vector<Choice>& choices,
                     const Usage& usage) {
  json out = base(h, false);
  out["choices"] = json::array();
  for (const Choice& c : choices) {
    json choice = {{"index", c.index}};
    if (h.chat) {
      json message = {{"role", "assistant"}};
      message["content"] = c.text.empty() && !c.tool_calls.empty() ? json(nullptr) : json(c.text);
      if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
      if (!c.tool_calls.empty()) {
        message["tool_calls"] = json::array();
        for (const auto& call : c.tool_calls) message["tool_calls"].push_back(tool_call_json(call));
      }
      choice["message"] = message;
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = logprobs_json(h, c.logprobs);
    choice["finish_reason"] = c.finish_reason;
    out["choices"].push_back(choice);
  }
  out["usage"] = usage_json(usage, h.chat);
  return out;
}

json chunk_json(const ResponseHeader& h, const Choice& c) {
  json out = base(h, true);
  json choice = {{"index", c.index}};
  if (h.chat) {
    json delta = json::object();
    if (c.role) delta["role"] = "assistant";
    if (!c.text.empty() || c.role) delta["content"] = c.text;
    if (!c.reasoning.empty()) delta["reasoning_content"] = c.reasoning;
    if (!c.tool_call_deltas.empty()) {
      json calls = json::array();
      for (const auto& d : c.tool_call_deltas) {
        json call = {{"index", d.index}};
        if (!d.name.empty()) {
          call["id"] = d.id;
          call["type"] = "function";
          call["function"] = {{"name", d.name}, {"arguments", d.arguments}};
        } else {
          call["function"] = {{"arguments", d.arguments}};
        }
        calls.push_back(call);
      }
      delta["tool_calls"] = calls;
    }
    choice["delta"] = delta;
  } else {
    choice["text"] = c.text;
  }
  choice["logprobs"] = logprobs_json(h, c.logprobs);
  choice["finish_reason"] = c.finish_reason;
  out["choices"] = json::array({choice});
  return out;
}

json usage_chunk_json(const ResponseHeader& h, const Usage& usage) {
  json out = base(h, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(usage, h.chat);
  return out;
}

}  // namespace server
