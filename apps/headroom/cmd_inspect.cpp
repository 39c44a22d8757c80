// headroom inspect FILE [--json]: metadata, tensor table and totals of a GGUF file.
#include <cstdio>

#include "commands.h"
#include "gguf/file.h"
#include "util/units.h"

namespace cli {

void add_inspect(CLI::App& app, int& exit_code) {
  struct Options {
    std::string path;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a GGUF file's metadata, tensors and architecture");
  cmd->add_option("file", opts->path, "GGUF file to inspect")->required();
  cmd->add_flag("--json", opts->json, "Print one machine-readable JSON document");
  cmd->callback([opts, &exit_code] {
    auto file = gguf::File::open(opts->path);
    if (!file) {
      std::fprintf(stderr, "%s\n", file.error().message().c_str());
      exit_code = kExitBadInput;
      return;
    }
    std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors, %s\n", opts->path.c_str(),
                file->version(), file->metadata().size(), file->tensors().size(),
                util::format_bytes(file->bytes().size()).c_str());
    exit_code = kExitOk;
  });
}

}  // namespace cli
