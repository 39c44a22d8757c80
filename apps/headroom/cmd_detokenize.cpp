// headroom detokenize: the text a list of token ids spells.
#include <cstdio>
#include <sstream>

#include "commands.h"
#include "tokenizer/tokenizer.h"

namespace cli {
namespace {

util::Result<std::vector<int32_t>> parse_token_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t begin = item.find_first_not_of(" \t");
    size_t end = item.find_last_not_of(" \t");
    std::string trimmed = begin == std::string::npos ? "" : item.substr(begin, end - begin + 1);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(trimmed, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (trimmed.empty() || used != trimmed.size() || v < 0 || v > INT32_MAX) {
      return util::errorf(
          "detokenize: '{}' in --ids is not a token id — pass comma-separated "
          "non-negative integers, e.g. 1,2,3",
          item);
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) return util::errorf("detokenize: --ids is empty — pass token ids, e.g. 1,2,3");
  return ids;
}

}  // namespace

void add_detokenize(CLI::App& app, int& exit_code) {
  struct Options {
    std::string model, ids;
    bool special = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("detokenize", "Print the text that token ids spell");
  cmd->add_option("-m,--model", opts->model,
                  "GGUF file whose tokenizer to use (default: the shipped stories260K)");
  cmd->add_option("--ids", opts->ids, "Comma-separated token ids, e.g. 1,403,407")->required();
  cmd->add_flag("--special", opts->special,
                "Show control tokens such as <s> instead of hiding them");
  cmd->callback([opts, &exit_code] {
    auto fail = [&](const std::string& message) {
      std::fprintf(stderr, "%s\n", message.c_str());
      exit_code = kExitBadInput;
    };
    auto ids = parse_token_ids(opts->ids);
    if (!ids) return fail(ids.error().message());
    const std::string path = opts->model.empty() ? default_model_path() : opts->model;
    auto tok = load_tokenizer(path);
    if (!tok) return fail(tok.error().message());
    for (int32_t id : *ids) {
      if (id >= tok->n_vocab()) {
        return fail(fmt::format("detokenize: id {} is outside the vocabulary of {} (0..{})", id,
                                path, tok->n_vocab() - 1));
      }
    }
    std::string text = tok->decode(*ids, opts->special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    exit_code = kExitOk;
  });
}

}  // namespace cli
