// The LoRA flags of every command that loads a model (--lora FILE[:SCALE], --max-loras,
// --max-lora-rank) and the adapters they name.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "engine/adapters.h"
#include "model/lora.h"
#include "util/result.h"

namespace cli {

struct LoraFlags {
  std::vector<std::string> files;  // FILE[:SCALE], repeatable
  model::LoraLimits slots;         // --max-loras, --max-lora-rank
};
// `serving`: the command holds several adapters and requests choose (serve); the others apply the
// one --lora to everything they evaluate.
void add_lora_flags(CLI::App* cmd, LoraFlags& flags, bool serving);

// The adapters of --lora, named after their files (adapter.gguf → "adapter"): one-line errors for
// a malformed SCALE or a name given twice.
util::Result<std::vector<engine::AdapterFile>> lora_files(const LoraFlags& flags);

}  // namespace cli
