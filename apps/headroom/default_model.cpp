// Where the shipped default model lives, relative to the binary or the working directory.
#include <unistd.h>

#include <filesystem>

#include "commands.h"

namespace cli {

std::string default_model_path() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("HEADROOM_MODEL")) return env;
  // Next to the repository the binary was built in (build/apps/headroom/headroom), then cwd.
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      fs::path candidate = dir / "models" / "stories260K.gguf";
      if (fs::exists(candidate)) return candidate.string();
    }
  }
  return "models/stories260K.gguf";
}

}  // namespace cli
