// Chat templates: a Jinja2 renderer compatible with Hugging Face's apply_chat_template.
//
// The renderer emulates what transformers does: jinja2's ImmutableSandboxedEnvironment with
// trim_blocks and lstrip_blocks, the loopcontrols extension, the {% generation %} tag, HF's
// tojson, and the globals raise_exception(msg) and strftime_now(fmt). docs/chat-templates.md
// lists the supported constructs. Every error is one line starting "chat template: "; errors in
// the template name its line and column; a template's own raise_exception(msg) reads
// "chat template: msg".
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"

namespace chat {

struct Program;

// Bounds that keep a hostile or broken template from exhausting the process.
struct RenderLimits {
  int max_depth = 256;                  // nested blocks plus macro calls
  int64_t max_iterations = 10'000'000;  // loop iterations per render, all loops together
  size_t max_string_bytes = 64u << 20;  // the output and any single string or list built
  int64_t max_milliseconds = 10'000;    // wall-clock time per render
};

// How the engine behaves, as opposed to what it renders.
struct EngineOptions {
  // Hugging Face uses the immutable sandbox (list.append raises). Some templates need a
  // mutable one (e.g. Kimi K2 with tool calls); this allows list/dict mutation methods.
  bool mutable_sandbox = false;
  // Local time returned by strftime_now(); unset means the current local time.
  std::optional<std::tm> now;
  RenderLimits limits;
};

class Template {
 public:
  // Parses the template; a syntax error or an unknown tag names its line and column.
  static util::Result<Template> parse(std::string_view source);
  // Renders with these variables (a JSON object; key order is kept, templates iterate dicts).
  util::Result<std::string> render(const nlohmann::ordered_json& variables,
                                   const EngineOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

struct RenderOptions {
  std::string bos_token;
  std::string eos_token;
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools = nullptr;  // OpenAI function list, or null
  // Further variables, e.g. {"enable_thinking": false}; they override the ones above.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  EngineOptions engine;
};

// Renders `messages` the way transformers' apply_chat_template does: the variables are
// messages, tools, documents (null), add_generation_prompt, bos_token, eos_token, then `extra`.
util::Result<std::string> apply_chat_template(std::string_view source,
                                              const nlohmann::ordered_json& messages,
                                              const RenderOptions& options);

// Built-in formats for a GGUF without a template or a --chat-template NAME: "gemma4" (the
// Gemma 4 reference template; thinking follows extra.enable_thinking), "chatml", "llama3".
util::Result<std::string_view> builtin_template(std::string_view name);

}  // namespace chat
