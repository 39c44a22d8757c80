// headroom run: plans, loads, and streams the continuation of a prompt (or, with --think, the reply
// to it as a chat turn with its reasoning apart).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "chat/template.h"
#include "commands.h"
#include "engine/media_prompt.h"
#include "generation.h"
#include "media_input.h"
#include "reply_printer.h"

namespace cli {

void add_run(CLI::App& app, int& exit_code) {
  struct Options {
    PlanFlags plan;
    SamplingFlags sampling;
    MediaFlags media;
    std::string prompt;
    int n_predict = 128;
    bool parse_special = false;
    bool verify_plan = false;
    bool think = false;
    std::string chat_template;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("run", "Generate a continuation of a prompt (streams to stdout)");
  add_plan_flags(cmd, o->plan, /*with_shape=*/false);
  add_sampling_flags(cmd, o->sampling);
  add_media_flags(cmd, o->media);
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text")->required();
  cmd->add_option("-n,--n-predict", o->n_predict,
                  "Tokens to generate (-1 = until an end token or the context is full)")
      ->capture_default_str();
  cmd->add_flag("--parse-special", o->parse_special,
                "Turn special-token text in the prompt (e.g. <|turn>) into tokens");
  cmd->add_flag("--verify-plan", o->verify_plan,
                "After loading and after generating, print plan vs. actual memory");
  cmd->add_flag(
      "--think", o->think,
      "Send the prompt as a user turn of the model's chat template with thinking on; the reasoning "
      "goes to stderr, the answer to stdout");
  cmd->add_option("--chat-template", o->chat_template,
                  "With --think: a built-in template name (gemma4, chatml, llama3) or a file");
  cmd->callback([o, &exit_code] {
    auto fail = [&](const std::string& message, int code) {
      std::fprintf(stderr, "%s\n", message.c_str());
      exit_code = code;
    };
    auto session = open_session(o->plan);
    if (!session) return fail(session.error().message(), kExitBadInput);
    if (o->verify_plan)
      std::fprintf(stderr, "after loading:\n%s", session->engine->verify().format().c_str());
    const auto sampling = o->sampling.params();
    if (sampling.temperature > 0)
      std::fprintf(stderr, "sampling: %s\n", sampling.describe().c_str());
    const tokenizer::Tokenizer& tok = *session->tokenizer;
    auto media = load_media(*session, o->media);
    if (!media) return fail(media.error().message(), kExitBadInput);
    engine::Request request{.max_tokens = o->n_predict, .sampling = sampling};
    std::optional<ReplyPrinter> reply;  // --think: the reasoning apart from the answer
    install_interrupt_handler();  // Ctrl-C stops generation cleanly from when the prompt shows
    if (o->think) {
      auto source =
          choose_chat_template(o->chat_template, *session->planned.file, session->planned.spec);
      if (!source) return fail(source.error().message(), kExitBadInput);
      const chat::OutputFormat format = chat::output_format_of(*source);
      if (format.reasoning.empty()) {
        std::fprintf(
            stderr,
            "--think: this chat template has no thinking channel; the prompt is sent as a user "
            "turn all the same\n");
      }
      chat::RenderOptions render;
      render.bos_token = std::string(tok.token_text(tok.bos()));
      render.eos_token = std::string(tok.token_text(tok.eos()));
      render.extra = {{"enable_thinking", true}};
      const nlohmann::ordered_json messages = {
          {{"role", "user"},
           {"content", media->empty() ? nlohmann::ordered_json(o->prompt)
                                      : content_parts(*media, o->prompt)}}};
      auto text = chat::apply_chat_template(*source, messages, render);
      if (!text) return fail(text.error().message(), kExitBadInput);
      // BOS is not doubled; the template's placeholders become the media's spans.
      auto placed =
          engine::attach_media(request, tok.encode(*text, {.add_bos = true, .parse_special = true}),
                               *media, *session->engine, tok);
      if (!placed) return fail(placed.error().message(), kExitBadInput);
      reply.emplace(format, *text);
    } else {
      auto placed = place_media(request, o->prompt, *media, *session, o->parse_special);
      if (!placed) return fail(placed.error().message(), kExitBadInput);
      std::fputs(o->prompt.c_str(), stdout);
      std::fflush(stdout);
    }
    auto g = generate(*session, std::move(request), [&reply](const std::string& text) {
      if (reply) return reply->push(text);
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    });
    if (reply) reply->finish();
    std::fputs("\n", stdout);
    std::fflush(
        stdout);  // the text ends before the evidence line on stderr, even when both are piped
    if (!g) return fail(g.error().message(), kExitBadInput);
    std::fprintf(stderr, "%s\n", evidence_line(*g, session->planned.plan).c_str());
    if (o->verify_plan)
      std::fprintf(stderr, "after generating:\n%s", session->engine->verify().format().c_str());
    if (!g->error.empty()) return fail(g->error, kExitFailure);
    exit_code = g->interrupted ? 130 : kExitOk;
  });
}

}  // namespace cli
