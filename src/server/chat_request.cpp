// Validating the chat parts of a request (see chat_request.h).
#include "server/chat_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "mm/image_preprocess.h"
#include "server/field_checks.h"

namespace server {
namespace {

// OpenAI's rule for function names; it also keeps names safe inside every call syntax.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A tool call of an assistant message, its arguments parsed: templates render objects (Gemma 4
// writes them in its own syntax, Hermes and Llama 3 with tojson).
Json tool_call(const Json& call, const std::string& p) {
  if (!call.is_object())
    fail(p,
         "must be an object {\"id\",\"type\":\"function\",\"function\":{\"name\",\"arguments\"}}");
  const std::string id = string(call, "id", p + ".id").value_or("");
  if (const Json* type = field(call, "type"); type && *type != "function")
    fail(p + ".type", "must be \"function\"");
  const Json* function = field(call, "function");
  if (!function || !function->is_object())
    fail(p + ".function", "must be an object with 'name' and 'arguments'");
  const auto name = string(*function, "name", p + ".function.name");
  if (!name || name->empty()) fail(p + ".function.name", "must be a non-empty string");
  Json arguments = Json::object();
  if (const Json* a = field(*function, "arguments")) {
    arguments = a->is_string() ? Json::parse(a->get<std::string>(), nullptr, false) : *a;
    if (!arguments.is_object()) {
      fail(p + ".function.arguments",
           "must be a JSON object (as a string, the way responses carry it)");
    }
  }
  return {
      {"id", id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", arguments}}}};
}

// A user message's content parts with media: text parts kept as parts, each medium decoded into
// `media` and left as the part the template places ({"type":"image"} / {"type":"audio"}).
Json media_content(const Json& content, const std::string& param, std::vector<MediaPart>& media) {
  Json parts = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string p = fmt::format("{}[{}]", param, i);
    if (is_media_part(part)) {
      media.push_back(media_part(part, p));
      parts.push_back({{"type", media.back().image ? "image" : "audio"}});
    } else {
      parts.push_back({{"type", "text"}, {"text", text_part(part, p)}});
    }
  }
  return parts;
}

bool has_media(const Json* content) {
  return content && content->is_array() &&
         std::any_of(content->begin(), content->end(), is_media_part);
}

Json parse_message(const Json& msg, const std::string& p, std::vector<MediaPart>& media) {
  if (!msg.is_object()) fail(p, "must be an object with 'role' and 'content'");
  const Json* role = field(msg, "role");
  if (!role || !role->is_string()) fail(p + ".role", "must be a string");
  std::string r = role->get<std::string>();
  if (r == "developer") r = "system";  // OpenAI's newer name for the system role
  if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
    fail(p + ".role",
         fmt::format("must be system, developer, user, assistant or tool, got '{}'", r));
  }
  const Json* content = field(msg, "content");
  const Json* calls = r == "assistant" ? field(msg, "tool_calls") : nullptr;
  if (!content && !calls) fail(p + ".content", "is required");
  if (has_media(content) && r != "user")
    fail(p + ".content", "carries an image or audio; only user messages may");
  Json out = {{"role", r},
              {"content", has_media(content) ? media_content(*content, p + ".content", media)
                          : content          ? Json(message_content(*content, p + ".content"))
                                             : Json("")}};
  if (calls) {
    if (!calls->is_array()) fail(p + ".tool_calls", "must be an array of tool calls");
    Json rendered = Json::array();
    for (size_t j = 0; j < calls->size(); ++j)
      rendered.push_back(tool_call((*calls)[j], fmt::format("{}.tool_calls[{}]", p, j)));
    out["tool_calls"] = rendered;
  }
  if (r == "assistant") {
    if (auto reasoning = string(msg, "reasoning_content", p + ".reasoning_content"))
      out["reasoning_content"] = *reasoning;
  }
  if (r == "tool") {
    const auto id = string(msg, "tool_call_id", p + ".tool_call_id");
    if (!id) fail(p + ".tool_call_id", "is required: the id of the call this message answers");
    out["tool_call_id"] = *id;
  }
  if (auto name = string(msg, "name", p + ".name")) out["name"] = *name;
  return out;
}

Json parse_messages(const Json& body, std::vector<MediaPart>& media) {
  const Json* m = field(body, "messages");
  if (!m) fail("messages", "is required");
  if (!m->is_array() || m->empty()) fail("messages", "must be a non-empty array of messages");
  Json out = Json::array();
  for (size_t i = 0; i < m->size(); ++i)
    out.push_back(parse_message((*m)[i], fmt::format("messages[{}]", i), media));
  return out;
}

// "image_tokens": the budget of the request's images, one Gemma 4 takes.
int parse_image_tokens(const Json& body) {
  const auto tokens = integer(body, "image_tokens", 0, 1120);
  if (!tokens) return 0;
  if (std::find(std::begin(mm::kImageTokenBudgets), std::end(mm::kImageTokenBudgets), *tokens) ==
      std::end(mm::kImageTokenBudgets))
    fail("image_tokens", fmt::format("must be 70, 140, 280, 560 or 1120, got {}", *tokens));
  return static_cast<int>(*tokens);
}

// Checks the tools' shapes (the schemas themselves are checked when a constraint is compiled);
// returns the declared names.
std::set<std::string> check_tools(const Json& tools) {
  if (!tools.is_array())
    fail("tools", "must be an array of {\"type\":\"function\",\"function\":{…}}");
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = fmt::format("tools[{}]", i);
    const Json& tool = tools[i];
    if (!tool.is_object() || tool.value("type", Json()) != "function")
      fail(p + ".type", "must be \"function\"");
    const Json* function = field(tool, "function");
    if (!function || !function->is_object()) fail(p + ".function", "must be an object with 'name'");
    const auto name = string(*function, "name", p + ".function.name");
    if (!name || !valid_function_name(*name)) {
      fail(p + ".function.name", "must be 1 to 64 letters, digits, underscores or dashes");
    }
    if (!names.insert(*name).second)
      fail(p + ".function.name", fmt::format("declares '{}' a second time", *name));
    string(*function, "description", p + ".function.description");
    if (const Json* params = field(*function, "parameters"); params && !params->is_object()) {
      fail(p + ".function.parameters", "must be a JSON schema object");
    }
  }
  return names;
}

void parse_tool_choice(const Json& body, const std::set<std::string>& names, ChatRequest& r) {
  const Json* choice = field(body, "tool_choice");
  if (!choice) return;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "auto")
      r.tool_choice = ToolChoice::kAuto;
    else if (c == "none")
      r.tool_choice = ToolChoice::kNone;
    else if (c == "required")
      r.tool_choice = ToolChoice::kRequired;
    else
      fail("tool_choice",
           fmt::format("must be \"auto\", \"none\", \"required\" or a function, got \"{}\"", c));
  } else {
    const Json* function = choice->is_object() ? field(*choice, "function") : nullptr;
    if (!function || !function->is_object() || !field(*function, "name")) {
      fail("tool_choice",
           "must be \"auto\", \"none\", \"required\" or "
           "{\"type\":\"function\",\"function\":{\"name\":…}}");
    }
    r.tool_choice = ToolChoice::kFunction;
    r.tool_choice_name = string(*function, "name", "tool_choice.function.name").value_or("");
    if (!names.count(r.tool_choice_name)) {
      fail("tool_choice.function.name",
           fmt::format("names '{}', which is not among the tools", r.tool_choice_name));
    }
  }
  if (names.empty() &&
      (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kFunction)) {
    fail("tool_choice", "asks for a call but the request declares no tools");
  }
}

// chat_template_kwargs pass to the template; reasoning_effort switches thinking (none: off).
void parse_thinking(const Json& body, ChatRequest& r) {
  if (const Json* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object())
      fail("chat_template_kwargs", "must be an object of template variables");
    r.template_variables = *kwargs;
  }
  if (auto effort = string(body, "reasoning_effort", "reasoning_effort")) {
    if (*effort != "none" && *effort != "minimal" && *effort != "low" && *effort != "medium" &&
        *effort != "high") {
      fail("reasoning_effort",
           fmt::format("must be none, minimal, low, medium or high, got '{}'", *effort));
    }
    if (!r.template_variables.contains("reasoning_effort"))
      r.template_variables["reasoning_effort"] = *effort;
    if (!r.template_variables.contains("enable_thinking"))
      r.template_variables["enable_thinking"] = *effort != "none";
  }
  if (const Json* on = field(r.template_variables, "enable_thinking")) {
    if (!on->is_boolean()) fail("chat_template_kwargs.enable_thinking", "must be true or false");
    r.thinking = on->get<bool>();
  }
}

}  // namespace

ChatRequest parse_chat_request(const Json& body) {
  ChatRequest r;
  r.messages = parse_messages(body, r.media);
  r.image_tokens = parse_image_tokens(body);
  if (field(body, "functions"))
    fail("functions", "is the retired form of 'tools': send 'tools' instead");
  std::set<std::string> names;
  if (const Json* tools = field(body, "tools")) {
    names = check_tools(*tools);
    if (!tools->empty()) r.tools = *tools;
  }
  parse_tool_choice(body, names, r);
  r.parallel_tool_calls = boolean(body, "parallel_tool_calls").value_or(true);
  parse_thinking(body, r);
  return r;
}

}  // namespace server
