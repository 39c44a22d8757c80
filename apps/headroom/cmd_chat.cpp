// headroom chat: an interactive conversation rendered with the model's own chat template.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "chat/template.h"
#include "commands.h"
#include "engine/media_prompt.h"
#include "generation.h"
#include "media_input.h"
#include "reply_printer.h"

namespace cli {

void add_chat(CLI::App& app, int& exit_code) {
  struct Options {
    PlanFlags plan;
    SamplingFlags sampling;
    std::string chat_template, system;
    int n_predict = -1;
    bool think = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "chat", "Chat interactively using the model's chat template (stdin → stdout)");
  add_plan_flags(cmd, o->plan, /*with_shape=*/false);
  add_sampling_flags(cmd, o->sampling);
  cmd->add_option("--chat-template", o->chat_template,
                  "Template: a built-in name (gemma4, chatml, llama3) or a file");
  cmd->add_option("--system", o->system, "System message");
  cmd->add_option("-n,--n-predict", o->n_predict, "Most tokens per reply (-1 = until an end token)")
      ->capture_default_str();
  cmd->add_flag("--think", o->think,
                "Ask the model to think first (templates with enable_thinking, e.g. Gemma 4's); "
                "the reasoning is shown on stderr, apart from the answer");
  cmd->callback([o, &exit_code] {
    auto fail = [&](const std::string& message, int code) {
      std::fprintf(stderr, "%s\n", message.c_str());
      exit_code = code;
    };
    auto session = open_session(o->plan);
    if (!session) return fail(session.error().message(), kExitBadInput);
    auto source =
        choose_chat_template(o->chat_template, *session->planned.file, session->planned.spec);
    if (!source) return fail(source.error().message(), kExitBadInput);
    auto parsed = chat::Template::parse(*source);
    if (!parsed)
      return fail(
          parsed.error().message() + " — pass --chat-template chatml, llama3, gemma4 or a file",
          kExitBadInput);
    const tokenizer::Tokenizer& tok = *session->tokenizer;
    chat::RenderOptions render;
    render.bos_token = std::string(tok.token_text(tok.bos()));
    render.eos_token = std::string(tok.token_text(tok.eos()));
    render.extra = {{"enable_thinking", o->think}};
    const chat::OutputFormat format = chat::output_format_of(*source);
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!o->system.empty()) messages.push_back({{"role", "system"}, {"content", o->system}});
    const auto sampling = o->sampling.params();
    std::fprintf(
        stderr,
        "chat: type a message and press Enter; /reset starts over; an empty line or EOF ends. "
        "Ctrl-C stops a reply.%s%s\n",
        session->engine->encoders() ? " /image FILE and /audio FILE add one to your next message."
                                    : "",
        sampling.temperature > 0 ? (" Sampling: " + sampling.describe()).c_str() : "");
    install_interrupt_handler();
    // Every medium of the conversation in order (the template places them all again each turn),
    // and those waiting for the next message.
    std::vector<std::shared_ptr<const mm::Media>> media, attached;
    std::string line;
    for (;;) {
      std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line) || line.empty()) break;
      if (line == "/reset") {
        messages.erase(messages.begin() + (o->system.empty() ? 0 : 1), messages.end());
        media.clear();
        attached.clear();
        continue;
      }
      if (line.starts_with("/image ") || line.starts_with("/audio ")) {
        const auto kind = line[1] == 'i' ? mm::MediaKind::kImage : mm::MediaKind::kAudio;
        auto m = load_media(*session, kind, line.substr(7));
        if (!m) {
          std::fprintf(stderr, "%s\n", m.error().message().c_str());
        } else {
          attached.push_back(std::move(*m));
          std::fprintf(stderr, "(%s of %d tokens added to your next message)\n",
                       std::string(mm::media_kind_name(kind)).c_str(), attached.back()->n_tokens);
        }
        continue;
      }
      messages.push_back({{"role", "user"},
                          {"content", attached.empty() ? nlohmann::ordered_json(line)
                                                       : content_parts(attached, line)}});
      const size_t n_before = media.size();
      media.insert(media.end(), attached.begin(), attached.end());
      attached.clear();
      auto text = chat::apply_chat_template(*source, messages, render);
      if (!text) return fail(text.error().message(), kExitBadInput);
      // Rendered templates carry their special tokens as text; BOS is not doubled.
      engine::Request request{.max_tokens = o->n_predict, .sampling = sampling};
      util::Status placed =
          engine::attach_media(request, tok.encode(*text, {.add_bos = true, .parse_special = true}),
                               media, *session->engine, tok);
      clear_interrupt();
      ReplyPrinter reply(format, *text);
      util::Result<Generation> g =
          placed ? generate(*session, std::move(request),
                            [&reply](const std::string& piece) { reply.push(piece); })
                 : util::Result<Generation>(placed.error());
      reply.finish();
      std::fputs("\n", stdout);
      if (!g) {
        // Too long for the context, most likely: say so, drop the turn, keep chatting.
        std::fprintf(stderr, "%s (use /reset to start over)\n", g.error().message().c_str());
        messages.erase(messages.end() - 1);
        media.resize(n_before);
        continue;
      }
      // The answer without its reasoning, as the template would strip it anyway.
      messages.push_back({{"role", "assistant"}, {"content", reply.answer()}});
      std::fprintf(stderr, "%s\n", evidence_line(*g, session->planned.plan).c_str());
    }
    exit_code = kExitOk;
  });
}

}  // namespace cli
