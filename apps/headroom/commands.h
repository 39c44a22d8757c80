// The CLI's subcommands: each file cmd_NAME.cpp registers one, with its options and defaults.
#pragma once

#include <CLI/CLI.hpp>

#include "tokenizer/tokenizer.h"

namespace cli {

// Exit codes shared by every subcommand.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;   // the command ran and failed (e.g. out of memory at run time)
constexpr int kExitBadInput = 2;  // bad file, bad argument, request that cannot be satisfied

// Each add_* registers a subcommand; when it runs, it stores its exit code in `exit_code`.
void add_inspect(CLI::App& app, int& exit_code);
void add_synth(CLI::App& app, int& exit_code);
void add_logits(CLI::App& app, int& exit_code);
void add_tokenize(CLI::App& app, int& exit_code);
void add_detokenize(CLI::App& app, int& exit_code);
void add_plan(CLI::App& app, int& exit_code);
void add_run(CLI::App& app, int& exit_code);
void add_chat(CLI::App& app, int& exit_code);
void add_kld(CLI::App& app, int& exit_code);
void add_bench(CLI::App& app, int& exit_code);
void add_serve(CLI::App& app, int& exit_code);
void add_load(CLI::App& app, int& exit_code);
void add_doctor(CLI::App& app, int& exit_code);
void add_quantize(CLI::App& app, int& exit_code);
void add_convert(CLI::App& app, int& exit_code);

// Which kernels run a model, and on how many threads (every command that evaluates one).
struct KernelFlags {
  int threads = 0;  // 0: the physical cores
  // auto: a GPU when this build and the machine allow it, else cpu; cuda: a GPU or an error;
  // cpu: the CPU kernels (SIMD, threads); ref: the scalar reference on the CPU (a baseline).
  std::string backend = "auto";
  bool reference() const { return backend == "ref"; }
  // For plan::DeviceOptions::gpu_backend: which GPUs the plan may use under this --backend.
  std::function<std::string(int)> gpu_backend() const;
};
void add_kernel_flags(CLI::App* cmd, KernelFlags& flags);

// The tokenizer of a GGUF file (tokenize, detokenize); the error names the file and the problem.
util::Result<tokenizer::Tokenizer> load_tokenizer(const std::string& path);

// The model used when a command gets no -m: the shipped stories260K.
std::string default_model_path();
// A file shipped in the repository (e.g. "bench/load/default-mix.jsonl"), found above the binary,
// else the relative path itself (from the working directory).
std::string shipped_file(const std::string& relative);

}  // namespace cli
