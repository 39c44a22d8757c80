// headroom plan: where every byte of a run would live and the speed that allows, before loading.
#include <cstdio>

#include "commands.h"
#include "plan/report.h"
#include "plan_flags.h"

namespace cli {

void add_plan(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<PlanFlags>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("plan", "Plan memory per device and predict decode speed, without loading weights");
  add_plan_flags(cmd, *flags, /*with_shape=*/true, /*default_slots=*/1, /*lora_slots=*/true);
  cmd->add_flag("--json", *json, "Print the plan as one JSON document");
  cmd->callback([flags, json, &exit_code] {
    auto planned = plan_model(*flags);
    if (!planned) {
      std::fprintf(stderr, "%s\n", planned.error().message().c_str());
      exit_code = kExitBadInput;
      return;
    }
    if (*json) {
      std::printf("%s\n", plan::plan_json(planned->plan, planned->spec, planned->source).dump(2).c_str());
    } else {
      std::printf("%s", plan::format_plan(planned->plan, planned->spec, planned->source).c_str());
    }
    // A plan that does not fit is a refusal for run/chat/serve; say so in the exit code too.
    exit_code = planned->plan.fits ? kExitOk : kExitBadInput;
  });
}

}  // namespace cli
