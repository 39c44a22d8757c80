// headroom inspect FILE [--json]: metadata, tensor table, totals and architecture of a GGUF file.
#include <cstdio>

#include "commands.h"
#include "gguf/file.h"
#include "inspect_report.h"

namespace cli {

void add_inspect(CLI::App& app, int& exit_code) {
  struct Options {
    std::string path;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("inspect", "Show a GGUF file's metadata, tensors and architecture");
  cmd->add_option("file", opts->path, "GGUF file to inspect")->required();
  cmd->add_flag("--json", opts->json, "Print one machine-readable JSON document instead of text");
  cmd->callback([opts, &exit_code] {
    auto file = gguf::File::open(opts->path);
    if (!file) {
      // A bad file: its one-line error and nothing on stdout, so scripts can tell.
      std::fprintf(stderr, "%s\n", file.error().message().c_str());
      exit_code = kExitBadInput;
      return;
    }
    const Json report = inspect_report(*file);
    // Strings from the file may hold invalid UTF-8: the JSON gets U+FFFD in their place.
    const std::string text = opts->json
                                 ? report.dump(2, ' ', false, Json::error_handler_t::replace) + "\n"
                                 : render_inspect_text(report);
    std::fwrite(text.data(), 1, text.size(), stdout);
    exit_code = kExitOk;
  });
}

}  // namespace cli
