// Where shipped files (the default model, the default load mix) live, relative to the binary or
// the working directory.
#include <unistd.h>

#include <filesystem>

#include "commands.h"

namespace cli {

std::string shipped_file(const std::string& relative) {
  namespace fs = std::filesystem;
  // Next to the repository the binary was built in (build/apps/headroom/headroom), then cwd.
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      fs::path candidate = dir / relative;
      if (fs::exists(candidate)) return candidate.string();
    }
  }
  return relative;
}

std::string default_model_path() {
  if (const char* env = std::getenv("HEADROOM_MODEL")) return env;
  return shipped_file("models/stories260K.gguf");
}

}  // namespace cli
