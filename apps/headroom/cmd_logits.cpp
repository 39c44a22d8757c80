// headroom logits: evaluates token ids through the scheduler and writes every position's logits as
// raw float32.
#include <cstdio>
#include <sstream>

#include "commands.h"
#include "engine/scheduler.h"

namespace cli {
namespace {

util::Result<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return util::errorf(
          "--ids: '{}' is not a token id — pass comma-separated non-negative integers", item);
    }
  }
  if (ids.empty())
    return util::errorf("--ids is empty — pass comma-separated token ids, e.g. 1,2,3");
  return ids;
}

}  // namespace

void add_logits(CLI::App& app, int& exit_code) {
  struct Options {
    std::string model, ids, output;
    int ubatch = 512;
    bool decode = false;
    std::string kv_type = "f32";
    KernelFlags kernels;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "logits", "Evaluate token ids; write logits [n_tokens x n_vocab] as float32");
  cmd->add_option("-m,--model", opts->model, "GGUF model (default: the shipped stories260K)");
  cmd->add_option("--ids", opts->ids, "Comma-separated token ids")->required();
  cmd->add_option("--ubatch", opts->ubatch, "Micro-batch size for the prefill")
      ->capture_default_str();
  cmd->add_flag("--decode", opts->decode,
                "Feed one token at a time (decode path) instead of micro-batches");
  cmd->add_option("--kv-type", opts->kv_type, "KV cache type for K and V: f32, f16, q8_0, q4_0")
      ->capture_default_str();
  cmd->add_option("-o,--output", opts->output, "Output file (little-endian float32)")->required();
  add_kernel_flags(cmd, opts->kernels);
  cmd->callback([opts, &exit_code] {
    auto fail = [&](const std::string& message, int code) {
      std::fprintf(stderr, "%s\n", message.c_str());
      exit_code = code;
    };
    auto ids = parse_ids(opts->ids);
    if (!ids) return fail(ids.error().message(), kExitBadInput);
    auto kv_type = gguf::tensor_type_from_name(opts->kv_type);
    if (!kv_type)
      return fail("--kv-type: unknown type '" + opts->kv_type + "' — use f32, f16, q8_0 or q4_0",
                  kExitBadInput);
    // --decode: micro-batches of one token, the path each generated token takes.
    engine::EngineOptions eo{
        .model_path = opts->model.empty() ? default_model_path() : opts->model,
        .request = {.n_ctx = static_cast<int>(ids->size()),
                    .k_type = *kv_type,
                    .v_type = *kv_type,
                    .n_ubatch = opts->decode ? 1 : opts->ubatch,
                    .logits_all_positions = true,
                    .n_threads = opts->kernels.threads,
                    .reference_kernels = opts->kernels.reference()},
        .devices = {.probe = false, .gpu_backend = opts->kernels.gpu_backend()}};
    auto engine = engine::Engine::load(eo);
    if (!engine) return fail(engine.error().message(), kExitBadInput);
    auto logits = engine::prompt_logits(**engine, *ids);
    if (!logits) return fail(logits.error().message(), kExitBadInput);
    FILE* f = std::fopen(opts->output.c_str(), "wb");
    if (!f || std::fwrite(logits->data(), sizeof(float), logits->size(), f) != logits->size()) {
      if (f) std::fclose(f);
      return fail("cannot write " + opts->output, kExitFailure);
    }
    std::fclose(f);
    std::fprintf(stderr, "wrote %zu x %d logits to %s\n", ids->size(), (*engine)->spec().n_vocab,
                 opts->output.c_str());
    exit_code = kExitOk;
  });
}

}  // namespace cli
