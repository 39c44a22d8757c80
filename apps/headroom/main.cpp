// headroom — entry point: parses the subcommand and runs it.
#include <cstdio>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"headroom — local LLM inference that plans memory exactly and measures itself"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "headroom 0.1.0");
  int exit_code = cli::kExitOk;
  cli::add_inspect(app, exit_code);
  cli::add_synth(app, exit_code);
  cli::add_logits(app, exit_code);
  cli::add_tokenize(app, exit_code);
  cli::add_detokenize(app, exit_code);
  cli::add_plan(app, exit_code);
  cli::add_run(app, exit_code);
  cli::add_chat(app, exit_code);
  cli::add_kld(app, exit_code);
  cli::add_bench(app, exit_code);
  cli::add_serve(app, exit_code);
  cli::add_load(app, exit_code);
  cli::add_doctor(app, exit_code);
  cli::add_quantize(app, exit_code);
  cli::add_convert(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : cli::kExitBadInput;
  }
  return exit_code;
}
