// headroom convert DIR -o FILE.gguf: a Hugging Face checkpoint (Gemma 4, llama) to GGUF,
// optionally quantized in the same pass; with --lora PEFT_DIR --base MODEL.gguf, a PEFT LoRA
// adapter to the GGUF adapter form.
#include <cstdio>

#include "commands.h"
#include "convert/convert_lora.h"
#include "convert/convert_model.h"
#include "plan/devices.h"
#include "progress_bar.h"
#include "quant_flags.h"

namespace cli {

namespace {

template <class Options>
void convert_adapter(const Options& o, int& exit_code) {
  util::ThreadPool pool(o.quant.threads > 0 ? o.quant.threads : plan::physical_cores());
  ProgressBar bar(stderr);
  auto result =
      convert::convert_lora(o.lora, o.out, {.base = o.base, .outtype = o.outtype, .name = o.name},
                            pool, [&bar](const convert::WriteProgress& p) { bar.update(p); });
  if (!result) {
    std::fprintf(stderr, "%s\n", result.error().message().c_str());
    exit_code = kExitBadInput;
    return;
  }
  print_write_summary(o.out, result->totals, o.outtype);
  std::printf("LoRA adapter for %s: %d matrices of rank ≤ %d, alpha %g\n", result->arch.c_str(),
              result->n_pairs, result->max_rank, result->alpha);
  exit_code = kExitOk;
}

}  // namespace

void add_convert(CLI::App& app, int& exit_code) {
  struct Options {
    std::string dir, out, outtype = "auto", name, lora, base;
    QuantFlags quant;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Convert a Hugging Face checkpoint (Gemma 4, llama; safetensors) to GGUF, or with --lora a "
      "PEFT LoRA adapter to a GGUF adapter");
  cmd->add_option("dir", opts->dir,
                  "Checkpoint directory: config.json, tokenizer.json or tokenizer.model, "
                  "model.safetensors or shards with model.safetensors.index.json");
  cmd->add_option("--lora", opts->lora,
                  "Convert this PEFT adapter directory instead (adapter_config.json, "
                  "adapter_model.safetensors) to the GGUF LoRA form llama.cpp's converter "
                  "writes; needs --base");
  cmd->add_option("--base", opts->base,
                  "With --lora: the base model's GGUF, which the adapter is checked against "
                  "(names, shapes, llama's RoPE row order)");
  cmd->add_option("-o,--output", opts->out, "GGUF file to write (replaced only when complete)")
      ->required();
  cmd->add_option("--outtype", opts->outtype,
                  "auto (BF16 if the checkpoint is BF16, else F16), f32, f16, bf16, or a quantize "
                  "type (then the quantize flags apply); with --lora: f32 (auto), f16 or bf16:" +
                      file_type_list())
      ->capture_default_str();
  cmd->add_option("--name", opts->name, "general.name (default: the directory's name)");
  add_quant_flags(cmd, opts->quant);
  cmd->callback([opts, &exit_code] {
    auto fail = [&](const util::Error& e) {
      std::fprintf(stderr, "%s\n", e.message().c_str());
      exit_code = kExitBadInput;
    };
    if (opts->dir.empty() == opts->lora.empty())
      return fail(
          util::errorf("convert: give a checkpoint directory, or --lora PEFT_DIR --base "
                       "MODEL.gguf"));
    if (!opts->lora.empty()) return convert_adapter(*opts, exit_code);
    auto mix = mix_options(opts->quant);
    if (!mix) return fail(mix.error());
    convert::ConvertOptions c;
    c.outtype = opts->outtype;
    c.mix = std::move(*mix);
    c.imatrix_path = opts->quant.imatrix;
    c.name = opts->name;
    util::ThreadPool pool(opts->quant.threads > 0 ? opts->quant.threads : plan::physical_cores());
    ProgressBar bar(stderr);
    auto result = convert::convert_checkpoint(
        opts->dir, opts->out, c, pool, [&bar](const convert::WriteProgress& p) { bar.update(p); });
    if (!result) return fail(result.error());
    print_write_summary(opts->out, result->totals, opts->outtype);
    std::printf("architecture %s, tokenizer %s with %lld tokens\n", result->arch.c_str(),
                result->vocab.model.c_str(), static_cast<long long>(result->vocab.n_tokens));
    if (result->skipped_tensors > 0) {
      std::printf("note: %d vision/audio tensors were left out (the text model only)\n",
                  result->skipped_tensors);
    }
    exit_code = kExitOk;
  });
}

}  // namespace cli
