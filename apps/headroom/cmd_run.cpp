// headroom run: plans, loads, and streams the continuation of a prompt.
#include <cstdio>

#include "commands.h"
#include "generation.h"

namespace cli {

void add_run(CLI::App& app, int& exit_code) {
  struct Options {
    PlanFlags plan;
    SamplingFlags sampling;
    std::string prompt;
    int n_predict = 128;
    bool parse_special = false;
    bool verify_plan = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("run", "Generate a continuation of a prompt (streams to stdout)");
  add_plan_flags(cmd, o->plan, /*with_shape=*/false);
  add_sampling_flags(cmd, o->sampling);
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text")->required();
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate (-1 = until an end token or the context is full)")
      ->capture_default_str();
  cmd->add_flag("--parse-special", o->parse_special, "Turn special-token text in the prompt (e.g. <|turn>) into tokens");
  cmd->add_flag("--verify-plan", o->verify_plan, "After loading and after generating, print plan vs. actual memory");
  cmd->callback([o, &exit_code] {
    auto fail = [&](const std::string& message, int code) {
      std::fprintf(stderr, "%s\n", message.c_str());
      exit_code = code;
    };
    auto session = open_session(o->plan);
    if (!session) return fail(session.error().message(), kExitBadInput);
    if (o->verify_plan) std::fprintf(stderr, "after loading:\n%s", session->engine->verify().format().c_str());
    const auto sampling = o->sampling.params();
    if (sampling.temperature > 0) std::fprintf(stderr, "sampling: %s\n", sampling.describe().c_str());
    auto prompt = session->tokenizer->encode(o->prompt, {.add_bos = true, .parse_special = o->parse_special});
    install_interrupt_handler();
    std::fputs(o->prompt.c_str(), stdout);
    std::fflush(stdout);
    auto g = generate(*session, std::move(prompt), sampling, o->n_predict, [](const std::string& text) {
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    });
    std::fputs("\n", stdout);
    std::fflush(stdout);  // the text ends before the evidence line on stderr, even when both are piped
    if (!g) return fail(g.error().message(), kExitBadInput);
    std::fprintf(stderr, "%s\n", evidence_line(*g, session->planned.plan).c_str());
    if (o->verify_plan) std::fprintf(stderr, "after generating:\n%s", session->engine->verify().format().c_str());
    if (!g->error.empty()) return fail(g->error, kExitFailure);
    exit_code = g->interrupted ? 130 : kExitOk;
  });
}

}  // namespace cli
