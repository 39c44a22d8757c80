// --lora FILE[:SCALE], --max-loras and --max-lora-rank: registration and parsing.
#include "lora_flags.h"

#include <cmath>
#include <filesystem>

namespace cli {

void add_lora_flags(CLI::App* cmd, LoraFlags& f, bool serving) {
  cmd->add_option("--lora", f.files,
                  serving ? "LoRA adapter (GGUF, as llama.cpp's converter or `headroom convert "
                            "--lora` writes it), FILE[:SCALE] (scale 1 by default); repeatable — a "
                            "server holds each beside the base model, and a request chooses one "
                            "by its name (the file's stem) in \"model\""
                          : "Apply a LoRA adapter (GGUF, as llama.cpp's converter or `headroom "
                            "convert --lora` writes it), FILE[:SCALE] (scale 1 by default)");
  if (!serving) return;
  cmd->add_option("--max-loras", f.slots.max_loras,
                  "Adapters held at once, for loading more while serving (POST "
                  "/v1/load_lora_adapter); default: one per --lora. Planned as slots of "
                  "--max-lora-rank on every target");
  cmd->add_option("--max-lora-rank", f.slots.max_rank,
                  "Largest adapter rank the slots hold (default: the largest --lora's)");
}

util::Result<std::vector<engine::AdapterFile>> lora_files(const LoraFlags& flags) {
  std::vector<engine::AdapterFile> out;
  for (const std::string& value : flags.files) {
    engine::AdapterFile f{.path = value};
    // A scale only when what follows the last ':' is a number (paths may hold colons).
    if (const size_t colon = value.rfind(':'); colon != std::string::npos) {
      const std::string tail = value.substr(colon + 1);
      size_t used = 0;
      float scale = 0;
      try {
        scale = std::stof(tail, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == tail.size() && !tail.empty()) {
        if (!std::isfinite(scale))
          return util::errorf("--lora {}: the scale must be a finite number", value);
        f.path = value.substr(0, colon);
        f.scale = scale;
      }
    }
    if (f.path.empty()) return util::errorf("--lora '{}': give FILE or FILE:SCALE", value);
    f.name = std::filesystem::path(f.path).stem().string();
    for (const engine::AdapterFile& other : out) {
      if (other.name == f.name) {
        return util::errorf("--lora: {} and {} would both be named '{}' — rename one file",
                            other.path, f.path, f.name);
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace cli
