// headroom synth: writes a random-weight GGUF model of a chosen architecture, shape and type.
#include <cstdio>

#include "chat/template.h"
#include "commands.h"
#include "model/synth.h"

namespace cli {

void add_synth(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<model::SynthOptions>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "synth", "Write a random-weight GGUF model of a real or tiny shape (seeded)");
  cmd->add_option("--arch", opts->arch, "Architecture: gemma4 or llama")->capture_default_str();
  cmd->add_option("--shape", opts->shape,
                  "gemma4: tiny-e, tiny-moe, tiny-dense-keqv, e2b, e4b, 26b-a4b, 31b; llama: tiny, "
                  "25m, 1b, 8b")
      ->capture_default_str();
  cmd->add_option("--type", opts->type,
                  "Weight type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, "
                  "q6_k, or the mix q4_k_m")
      ->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Random seed (same seed, same bytes)")
      ->capture_default_str();
  cmd->add_option("--vocab", opts->vocab_path,
                  "Copy the tokenizer from this GGUF (sets the vocabulary size); without it gemma4 "
                  "gets Gemma 4's "
                  "special tokens and chat template, llama a small SentencePiece vocabulary");
  cmd->add_flag(
      "--shared-kv-tensors", opts->shared_kv_tensors,
      "Also write unused K/V tensors on KV-shared layers (files differ on this, spec §3.3)");
  cmd->add_flag("--zero-ple", opts->zero_ple,
                "Zero the per-layer embedding table (a test of the PLE path)");
  cmd->add_flag(
      "--no-weights", opts->no_weights,
      "Write the header only: the weights are a hole in a sparse file and read as zeros (fast; for "
      "memory and speed tests of big shapes)");
  cmd->add_option("-o,--output", *out, "Output .gguf path")->required();
  cmd->callback([opts, out, &exit_code] {
    // The built-in Gemma 4 vocabulary carries the model's own template, so chat, tool calls and
    // thinking work on a synth model as on a released file.
    if (opts->arch == "gemma4" && opts->vocab_path.empty()) {
      opts->chat_template = std::string(*chat::builtin_template("gemma4"));
    }
    auto writer = model::synth_writer(*opts);
    if (!writer) {
      std::fprintf(stderr, "%s\n", writer.error().message().c_str());
      exit_code = kExitBadInput;
      return;
    }
    auto status = writer->write(*out);
    if (!status) {
      std::fprintf(stderr, "%s\n", status.error().message().c_str());
      exit_code = kExitFailure;
      return;
    }
    std::printf("wrote %s (%s %s %s, %zu tensors)\n", out->c_str(), opts->arch.c_str(),
                opts->shape.c_str(), opts->type.c_str(), writer->n_tensors());
    exit_code = kExitOk;
  });
}

}  // namespace cli
