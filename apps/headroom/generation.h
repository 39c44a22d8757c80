// What run and chat share: sampling flags, opening a planned engine with its tokenizer, one
// streamed generation through the scheduler, Ctrl-C, and the closing evidence line.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler.h"
#include "plan_flags.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace cli {

struct SamplingFlags {
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  float presence_penalty = 0;
  float frequency_penalty = 0;
  int64_t seed = -1;  // -1: a random seed, printed so the run can be repeated
  sample::SamplingParams params() const;
};
void add_sampling_flags(CLI::App* cmd, SamplingFlags& flags);

struct Session {
  PlannedModel planned;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::string adapter;  // the --lora every generation runs under (not serving); empty: none
};

// Plans (printing the plan to stderr, as every command that loads a model does), refuses what
// does not fit, loads the engine, the --lora adapters and the tokenizer. Only a server
// (`serving`) holds several adapters; the other commands apply their one --lora to everything.
util::Result<Session> open_session(const PlanFlags& flags, bool serving = false);

struct Generation {
  std::vector<int32_t> tokens;  // generated ids, the end token included if one was sampled
  engine::FinishReason reason = engine::FinishReason::kNone;
  engine::RequestStats stats;
  std::string error;
  bool interrupted = false;
};

// Generates from `request` (its prompt and media, sampling and max_tokens; the end tokens and
// callbacks are set here), passing each piece of text to `on_text` as soon as it is whole UTF-8.
util::Result<Generation> generate(Session& session, engine::Request request,
                                  const std::function<void(const std::string&)>& on_text);

// The chat template: --chat-template NAME|FILE, else the one in the GGUF, else the built-in for the
// architecture (Gemma 4), else `fallback` (a built-in name, said on stderr) if not empty.
util::Result<std::string> choose_chat_template(const std::string& override_value,
                                               const gguf::File& file, const model::Spec& spec,
                                               std::string_view fallback = {});

// "prompt 5 tok (812.3 tok/s) | generated 128 tok, 95.1 tok/s steady, 10.5 ms/tok | first token 6.2
// ms |
//  1.0 MiB/token → 0.10 GB/s, 3% of the 3.2 GB/s roofline"
// "cpu kernels (avx2), 2 threads" or "cuda kernels on cuda:0 NVIDIA H100 80GB HBM3" — what runs
// the model, for the evidence line and bench.
std::string kernels_description(const plan::Plan& plan);
// "lora: NAME (FILE): 98 matrices of rank ≤ 16, alpha 32, scale 1, 3.1 MiB in its slot"
std::string describe_adapter(const engine::AdapterInfo& adapter);
std::string evidence_line(const Generation& g, const plan::Plan& plan);

// Ctrl-C stops the current generation cleanly; a second one ends the process.
void install_interrupt_handler();
bool interrupted();
void clear_interrupt();

}  // namespace cli
