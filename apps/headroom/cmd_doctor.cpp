// headroom doctor: diagnoses this machine and model from measured evidence — a verdict table of
// observation → likely cause → action per check (the rules are in src/doctor/rules.cpp).
#include <cstdio>

#include "commands.h"
#include "doctor/doctor.h"
#include "plan_flags.h"

namespace cli {

void add_doctor(CLI::App& app, int& exit_code) {
  struct Options {
    PlanFlags plan;
    std::string endpoint;
    double max_seconds = 60;
    bool json = false;
    bool markdown = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("doctor",
                                     "Diagnose speed from measured evidence: placement, fit, "
                                     "backend, partial offload, KV growth, memory "
                                     "pressure, contention, GPU throttling, roofline; a verdict "
                                     "table of observation → cause → action");
  add_plan_flags(cmd, o->plan, false);
  cmd->add_option("--endpoint", o->endpoint,
                  "Also probe an OpenAI-compatible server, e.g. http://127.0.0.1:8080 (first-token "
                  "time and tok/s, "
                  "one stream vs 4)");
  cmd->add_option("--max-seconds", o->max_seconds,
                  "Time limit for measuring the engine: it decodes less to fit, or says it cannot "
                  "(default 60; progress goes to stderr)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "Print verdicts and the raw measurements as one JSON document");
  cmd->add_flag("--markdown", o->markdown,
                "Print the verdicts as a Markdown table (one row per verdict, to paste into an "
                "issue) instead of blocks wrapped at 100 columns");
  cmd->callback([o, &exit_code] {
    if (!o->plan.lora.files.empty()) {
      std::fprintf(stderr,
                   "doctor: it measures the base model — drop --lora (`headroom plan --lora` shows "
                   "the adapters' memory, `headroom bench --lora` their speed)\n");
      exit_code = kExitBadInput;
      return;
    }
    if (!o->plan.draft_model.empty()) {
      std::fprintf(stderr,
                   "doctor: it measures the model alone — drop --draft-model (`headroom plan "
                   "--draft-model` shows the drafter's memory, `headroom bench --draft-model` its "
                   "speed)\n");
      exit_code = kExitBadInput;
      return;
    }
    auto planned = plan_model(o->plan);
    if (!planned) {
      std::fprintf(stderr, "doctor: %s\n", planned.error().message().c_str());
      exit_code = kExitBadInput;
      return;
    }
    doctor::Options options{.file = planned->file,
                            .spec = planned->spec,
                            .plan = planned->plan,
                            .endpoint = o->endpoint,
                            .max_seconds = o->max_seconds,
                            .progress = [](const std::string& what) {
                              std::fprintf(stderr, "doctor: %s\n", what.c_str());
                            }};
    auto report = doctor::run(options);
    if (!report) {
      std::fprintf(stderr, "doctor: %s\n", report.error().message().c_str());
      exit_code = kExitFailure;
      return;
    }
    report->model = planned->source;
    if (o->json) {
      std::printf("%s\n", doctor::report_json(*report).dump(2).c_str());
    } else {
      std::printf("%s", doctor::format_report(*report, o->markdown ? doctor::ReportStyle::kMarkdown
                                                                   : doctor::ReportStyle::kText)
                            .c_str());
    }
    exit_code = kExitOk;
  });
}

}  // namespace cli
