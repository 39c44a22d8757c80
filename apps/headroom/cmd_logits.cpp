// headroom logits: evaluates token ids through the scheduler and writes every position's logits as
// raw float32.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "engine/scheduler.h"
#include "lora_flags.h"

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

// The forward passes' named intermediates, gathered over every micro-batch: one file per tensor
// and layer (NAME.LAYER.f32, rows [n_tokens][width]; NAME.f32 for the model's own) and an index.
class TraceDump {
 public:
  void add(const model::TracedTensor& t) {
    const std::string key =
        t.layer >= 0 ? fmt::format("{}.{}", t.name, t.layer) : std::string(t.name);
    auto [it, fresh] = tensors_.try_emplace(key);
    if (fresh) order_.push_back(key);
    Tensor& out = it->second;
    out.width = t.width;
    out.values.insert(out.values.end(), t.data, t.data + t.n_tokens * t.width);
  }
  util::Status write(const std::string& dir) const {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    nlohmann::json index = nlohmann::json::array();
    for (const auto& key : order_) {
      const Tensor& t = tensors_.at(key);
      const std::string file = key + ".f32";
      std::ofstream out(std::filesystem::path(dir) / file, std::ios::binary);
      out.write(reinterpret_cast<const char*>(t.values.data()),
                static_cast<std::streamsize>(t.values.size() * sizeof(float)));
      if (!out) return util::errorf("--trace: cannot write {}/{}", dir, file);
      index.push_back({{"tensor", key},
                       {"file", file},
                       {"rows", t.values.size() / t.width},
                       {"width", t.width}});
    }
    std::ofstream out(std::filesystem::path(dir) / "trace.json");
    out << index.dump(1) << "\n";
    if (!out) return util::errorf("--trace: cannot write {}/trace.json", dir);
    return {};
  }

 private:
  struct Tensor {
    int64_t width = 0;
    std::vector<float> values;
  };
  std::map<std::string, Tensor> tensors_;
  std::vector<std::string> order_;  // as first seen: the order of the forward pass
};

}  // namespace

void add_logits(CLI::App& app, int& exit_code) {
  struct Options {
    std::string model, ids, output;
    int ubatch = 512;
    bool decode = false;
    std::string kv_type = "f32";
    std::string trace_dir;
    KernelFlags kernels;
    LoraFlags lora;
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
  cmd->add_option("--trace", opts->trace_dir,
                  "Also dump every named intermediate (attn_norm, Qcur, l_out, … per layer, as "
                  "llama.cpp names them) into this directory: NAME.LAYER.f32 and trace.json");
  add_kernel_flags(cmd, opts->kernels);
  add_lora_flags(cmd, opts->lora, /*serving=*/false);
  cmd->callback([opts, &exit_code] {
    auto fail = [&](const std::string& message, int code) {
      std::fprintf(stderr, "%s\n", message.c_str());
      exit_code = code;
    };
    auto adapters = lora_files(opts->lora);
    if (!adapters) return fail(adapters.error().message(), kExitBadInput);
    if (adapters->size() > 1) return fail("logits: give at most one --lora", kExitBadInput);
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
    eo.adapters = *adapters;
    auto dump = std::make_shared<TraceDump>();
    if (!opts->trace_dir.empty()) {
      eo.trace = [dump](const model::TracedTensor& t) { dump->add(t); };
    }
    auto engine = engine::Engine::load(eo);
    if (!engine) return fail(engine.error().message(), kExitBadInput);
    auto logits =
        engine::prompt_logits(**engine, *ids, {}, adapters->empty() ? "" : adapters->front().name);
    if (!logits) return fail(logits.error().message(), kExitBadInput);
    FILE* f = std::fopen(opts->output.c_str(), "wb");
    if (!f || std::fwrite(logits->data(), sizeof(float), logits->size(), f) != logits->size()) {
      if (f) std::fclose(f);
      return fail("cannot write " + opts->output, kExitFailure);
    }
    std::fclose(f);
    std::fprintf(stderr, "wrote %zu x %d logits to %s\n", ids->size(), (*engine)->spec().n_vocab,
                 opts->output.c_str());
    if (!opts->trace_dir.empty()) {
      if (auto written = dump->write(opts->trace_dir); !written)
        return fail(written.error().message(), kExitFailure);
      std::fprintf(stderr, "wrote the traced intermediates to %s (index: trace.json)\n",
                   opts->trace_dir.c_str());
    }
    exit_code = kExitOk;
  });
}

}  // namespace cli
