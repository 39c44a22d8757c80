// The planning flags shared by plan, run, chat and serve, and the plan they produce.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "engine/adapters.h"
#include "engine/engine.h"
#include "gguf/file.h"
#include "lora_flags.h"
#include "model/spec.h"
#include "plan/planner.h"

namespace cli {

struct PlanFlags {
  std::string model;         // -m FILE
  std::string shape, quant;  // --shape gemma4-e2b --quant q4_k_m (plan command only)
  int ctx = 0;               // 0: the model's training context, capped at 4096
  std::string kv_type_k = "f16", kv_type_v = "f16";
  int slots = 1;
  int ubatch = 512;
  int draft = -1;  // speculative decoding: most tokens drafted per step (0: off; -1: the default)
  std::string draft_model;  // a Gemma 4 assistant drafter or a small model of the same vocabulary
  std::string kv_budget;    // e.g. 2G; empty: what the device budget leaves
  bool no_prefix_cache = false;
  std::string gpu_mem, cpu_mem, assume_gpu;
  int cpu_layers = 0;
  bool ple_on_host = false, experts_on_host = false;
  bool fit = false;
  KernelFlags kernels;
  LoraFlags lora;
  // A projector (images, audio): its encoders are planned and loaded beside the model.
  std::string mmproj;
  int image_tokens = -1;      // -1: the processor's 280 when the projector sees images, else 0
  double audio_seconds = -1;  // -1: 30 s when the projector hears audio, else 0
};

// Registers the flags on `cmd`. `with_shape` adds --shape/--quant (plans without a file);
// `lora_slots` adds --max-loras and --max-lora-rank (commands that plan a server).
void add_plan_flags(CLI::App* cmd, PlanFlags& flags, bool with_shape, int default_slots = 1,
                    bool lora_slots = false);

// An opened model with its spec: from -m (or the default model) or from --shape/--quant.
struct PlannedModel {
  std::shared_ptr<gguf::File> file;
  model::Spec spec;
  std::string source;
  plan::Plan plan;
  std::vector<engine::AdapterFile> adapters;   // --lora, checked against the model
  std::optional<engine::Projector> projector;  // --mmproj
  std::optional<engine::Drafter> drafter;      // --draft-model
};

// Opens the model and plans the request (applying --fit if asked). Errors are one line.
util::Result<PlannedModel> plan_model(const PlanFlags& flags);

}  // namespace cli
