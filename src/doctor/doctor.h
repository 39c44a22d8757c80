// doctor::run — runs every probe on this machine (plan facts, the engine's decode speed at two
// depths and with concurrent streams, memory and CPU samples, GPU telemetry, an endpoint) and
// applies the rules (rules.h) to what they measured.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "doctor/gpu_telemetry.h"
#include "doctor/rules.h"
#include "engine/engine.h"
#include "gguf/file.h"
#include "model/spec.h"
#include "plan/planner.h"

namespace doctor {

struct Options {
  std::shared_ptr<gguf::File> file;
  model::Spec spec;
  plan::Plan plan;              // the user's request as planned (with a what-if GPU if asked)
  std::string endpoint;         // --endpoint URL; empty: not probed
  GpuTelemetry* gpu = nullptr;  // null: default_gpu_telemetry()
  // The backend of GPU `index` the engine measures on (null: this build's). Tests supply an
  // emulated GPU, which also stands in for an --assume-gpu what-if; without one a what-if GPU
  // is not here to measure, and the engine runs on the CPU.
  engine::GpuBackendFactory gpu_backend;
  int n_gen = 48;  // tokens decoded per speed measurement (fewer to fit the limit)
  int n_concurrent = 4;
  double max_seconds = 60;  // the engine's measurements shrink to fit this, or are not run
  std::function<void(const std::string&)> progress;  // what is being measured now; may be null
};

// How the engine's run was measured: where, and the workload the time limit allowed.
struct RunFacts {
  std::string device;  // the device that ran it (empty: not loaded)
  double max_seconds = 0;
  double step_seconds = 0;     // calibration: one token's forward pass (weights faulting in)
  double prefill_seconds = 0;  // per token, batched
  double decode_seconds = 0;   // per token
  int n_gen = 0, reps = 0, short_depth = 0, long_depth = 0, n_concurrent = 0;  // 0: not run
};

struct Report {
  RunFacts run;
  Observations observations;
  std::vector<Verdict> verdicts;
  std::string model;  // what was diagnosed
  double seconds = 0;
};

util::Result<Report> run(const Options& options);

// kText: a block per check wrapped at 100 columns, for a terminal; kMarkdown: one table row per
// verdict, to paste into an issue.
enum class ReportStyle { kText, kMarkdown };
std::string format_report(const Report& report, ReportStyle style = ReportStyle::kText);
nlohmann::ordered_json report_json(const Report& report);

}  // namespace doctor
