// Chat templates: parsing, rendering with Hugging Face's variables, and the built-in formats.
#include "chat/template.h"

#include <fmt/format.h>

#include "chat/interpreter.h"
#include "chat/lexer.h"
#include "chat/parser.h"
#include "chat/unicode.h"

namespace chat {

std::string_view embedded_template(std::string_view name);  // generated from templates/*.jinja

namespace {

// Errors are one line: a newline quoted from the template is written as \n.
util::Error template_error(const util::Error& e) {
  std::string one_line;
  for (char c : e.message()) {
    if (c == '\n') {
      one_line += "\\n";
    } else if (c == '\r') {
      one_line += "\\r";
    } else {
      one_line += c;
    }
  }
  return util::Error(one_line).with_context("chat template");
}

}  // namespace

util::Result<Template> Template::parse(std::string_view source) {
  size_t bad = 0;
  if (!unicode::valid_utf8(source, &bad)) {
    return util::errorf("chat template: byte {} is not valid UTF-8 — save the template as UTF-8",
                        bad);
  }
  auto tokens = tokenize(source, LexerOptions{});
  if (!tokens) return template_error(tokens.error());
  auto body = chat::parse(*tokens);
  if (!body) return template_error(body.error());
  auto program = std::make_shared<Program>();
  program->body = std::move(*body);
  return Template(std::move(program));
}

util::Result<std::string> Template::render(const nlohmann::ordered_json& variables,
                                           const EngineOptions& options) const {
  if (!variables.is_object()) {
    return util::Error("chat template: the variables must be a JSON object");
  }
  auto globals = std::make_shared<Scope>();
  add_globals(*globals);
  for (const auto& [name, value] : variables.items()) {
    auto v = from_json(value);
    if (!v) return util::errorf("chat template: variable '{}': {}", name, v.error().message());
    globals->set(name, std::move(*v));
  }
  Interpreter interp(options);
  auto out = interp.render(program_->body, globals);
  if (!out && interp.raised()) return out.error().with_context("chat template");  // verbatim
  if (!out) return template_error(out.error());
  return out;
}

util::Result<std::string> apply_chat_template(std::string_view source,
                                              const nlohmann::ordered_json& messages,
                                              const RenderOptions& options) {
  if (!messages.is_array()) return util::Error("chat template: messages must be a JSON array");
  if (!options.extra.is_object()) {
    return util::Error("chat template: extra variables must be a JSON object");
  }
  HR_ASSIGN_OR_RETURN(Template tmpl, Template::parse(source));
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["messages"] = messages;
  vars["tools"] = options.tools;
  vars["documents"] = nullptr;
  vars["add_generation_prompt"] = options.add_generation_prompt;
  vars["bos_token"] = options.bos_token;
  vars["eos_token"] = options.eos_token;
  for (const auto& [name, value] : options.extra.items()) vars[name] = value;
  return tmpl.render(vars, options.engine);
}

util::Result<std::string_view> builtin_template(std::string_view name) {
  std::string_view text = embedded_template(name);
  if (text.empty()) {
    return util::errorf(
        "chat template: no built-in template named '{}' — use gemma4, chatml or "
        "llama3, or pass a template FILE",
        name);
  }
  return text;
}

}  // namespace chat
