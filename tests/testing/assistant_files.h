// Gemma 4 assistant drafters for the model tests: a tiny synthesized target with a random drafter
// written for it by the NumPy writer (tests/reference/write_assistant.py), the target's prefill
// that hands the drafter its hidden state, chained draft steps and the float64 reference's logits
// for them — the check AssistantOracle runs on the CPU and the emulated GPU and CudaAssistant on a
// real GPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "model/assistant.h"
#include "model/synth.h"
#include "testing/model_passes.h"
#include "testing/testing.h"

namespace testing_util {

// Whether python3() imports numpy (the reference writers need it).
inline bool have_numpy() {
  std::string out, err;
  return run_command(python3() + " -c 'import numpy'", &out, &err) == 0;
}

struct AssistantFiles {
  std::filesystem::path target, drafter;
};

// A tiny target of `shape` and a drafter of `weight_type` written for it (output norm scaled so
// that a misread step moves the logits far).
inline AssistantFiles write_assistant_files(const std::string& shape,
                                            const std::string& weight_type,
                                            const std::filesystem::path& dir) {
  AssistantFiles f;
  f.target = dir / (shape + "-target.gguf");
  f.drafter = dir / (shape + "-" + weight_type + "-assistant.gguf");
  auto w = model::synth_writer({.arch = "gemma4", .shape = shape});
  EXPECT_TRUE(w.ok()) << w.error().message();
  if (!w.ok()) return f;
  EXPECT_TRUE(w->write(f.target.string()).ok());
  write_assistant(f.target, f.drafter,
                  "--type " + weight_type + " --n-embd 64 --output-norm-scale 16");
  return f;
}

// The target's prefill of `prompt` in micro-batches of `ubatch` into its cache (slot 0): the hidden
// state of the last row ([n_embd]).
inline std::vector<float> prefill_hidden(LoadedModel& target, const std::vector<int32_t>& prompt,
                                         int ubatch, int n_vocab, int n_embd) {
  const int n_prompt = static_cast<int>(prompt.size());
  std::vector<float> logits(static_cast<size_t>(ubatch) * n_vocab), hidden(n_embd);
  EXPECT_TRUE(target.cache->reserve(0, n_prompt));
  for (int start = 0; start < n_prompt; start += ubatch) {
    const int n = std::min(ubatch, n_prompt - start);
    std::vector<int32_t> pos(n), slot(n, 0);
    for (int i = 0; i < n; ++i) pos[i] = start + i;
    const model::Batch batch{
        .tokens = std::span(prompt).subspan(start, n), .pos = pos, .slot = slot};
    const bool last = start + n == n_prompt;
    auto status = target.model->forward(
        batch, *target.cache, {.logits = logits.data(), .hidden = last ? hidden.data() : nullptr});
    EXPECT_TRUE(status.ok()) << status.error().message();
  }
  return hidden;
}

// The drafter's logits of chained single-row steps at position `pos` (slot 0), one per token of
// `tokens`, each step reading the hidden state the one before it left ([steps][n_vocab]).
inline std::vector<float> draft_steps(model::Assistant& drafter, kv::Cache& cache,
                                      std::vector<float> hidden, const std::vector<int32_t>& tokens,
                                      int32_t pos, int n_vocab) {
  std::vector<float> logits(tokens.size() * n_vocab);
  const int32_t slot = 0;
  for (size_t k = 0; k < tokens.size(); ++k) {
    const model::DraftBatch step{.tokens = std::span(&tokens[k], 1),
                                 .pos = std::span(&pos, 1),
                                 .slot = std::span(&slot, 1),
                                 .hidden = hidden.data()};
    auto status = drafter.step(step, cache, {.logits = logits.data() + k * n_vocab}, hidden.data());
    EXPECT_TRUE(status.ok()) << status.error().message();
  }
  return logits;
}

// The float64 reference's logits of the same steps (tests/reference/reference_assistant.py, written
// from the published description without headroom's code), the target's cache rounded to `kv`
// (f32, f16 or q8_0) as headroom's is.
inline std::vector<float> reference_steps(const AssistantFiles& f,
                                          const std::vector<int32_t>& prompt,
                                          const std::vector<int32_t>& tokens, const std::string& kv,
                                          const std::filesystem::path& dir) {
  auto joined = [](const std::vector<int32_t>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
    return s;
  };
  const std::filesystem::path out = dir / "assistant-reference.f32";
  const std::filesystem::path script = reference_script("reference_assistant.py");
  const std::string command = python3() + " " + script.string() + " " + f.target.string() + " " +
                              f.drafter.string() + " --ids " + joined(prompt) + " --tokens " +
                              joined(tokens) + " -o " + out.string() + " --kv-type " + kv;
  std::string stdout_text, stderr_text;
  EXPECT_EQ(run_command(command, &stdout_text, &stderr_text), 0) << command << "\n"
                                                                 << stdout_text << stderr_text;
  // A drafter that does not fit its target is warned about: agreeing on it would prove nothing.
  EXPECT_EQ(stderr_text.find("warning"), std::string::npos) << stderr_text;
  return read_f32(out);
}

// Each step's max |Δlogit| / max |logit| within `tolerance`; each printed, with the worst.
inline void expect_steps_close(const std::vector<float>& got, const std::vector<float>& expected,
                               int n_vocab, double tolerance, const std::string& name) {
  ASSERT_EQ(got.size(), expected.size());
  double worst = 0;
  for (size_t k = 0; k < got.size() / n_vocab; ++k) {
    double max_diff = 0, max_logit = 0;
    for (int i = 0; i < n_vocab; ++i) {
      const double e = expected[k * n_vocab + i];
      max_logit = std::max(max_logit, std::fabs(e));
      max_diff = std::max(max_diff, std::fabs(e - got[k * n_vocab + i]));
    }
    const double rel = max_diff / max_logit;
    std::printf("[ assistant ] %-26s step %zu max|dlogit| %.3g (max|logit| %.3g, rel %.2g)\n",
                name.c_str(), k, max_diff, max_logit, rel);
    EXPECT_LE(rel, tolerance) << "step " << k;
    worst = std::max(worst, rel);
  }
  std::printf("[ assistant ] %-26s worst relative difference %.3g (tolerance %.3g)\n", name.c_str(),
              worst, tolerance);
}

// One case of the drafter's check: a target of `shape` (its cache `kv`, the reference's
// `kv_name`) and a drafter of `weights`, each step within `tolerance` (max |Δlogit| / max |logit|).
struct AssistantCase {
  std::string name, shape, weights;
  tensor::DType kv;
  std::string kv_name;
  double tolerance;
};

inline void PrintTo(const AssistantCase& c, std::ostream* os) {
  *os << c.name;
}

// The whole check on the backend `backend(max_cols)` gives (sized for the widest product of
// target and drafter): the target prefills a prompt past its sliding window (8) in micro-batches
// of 5 and hands back its hidden state at the last position; the drafter runs three chained steps
// at the next position over the target's cache; each step's logits against the reference's.
inline void expect_draft_steps_match_reference(
    const AssistantCase& c, const std::function<kernels::Backend&(int64_t max_cols)>& backend) {
  constexpr int kPrompt = 21;
  const std::filesystem::path dir = temp_dir();
  const AssistantFiles f = write_assistant_files(c.shape, c.weights, dir);
  auto target_file = gguf::File::open(f.target.string());
  auto drafter_file = gguf::File::open(f.drafter.string());
  ASSERT_TRUE(target_file.ok() && drafter_file.ok());
  auto target = model::spec_from_gguf(*target_file);
  auto drafter = model::drafter_spec_from_gguf(*drafter_file);
  ASSERT_TRUE(target.ok()) << target.error().message();
  ASSERT_TRUE(drafter.ok()) << drafter.error().message();
  const int V = target->n_vocab, NB = target->n_embd;
  kernels::Backend& ops =
      backend(std::max(model::max_matmul_cols(*target), model::max_matmul_cols(*drafter)));
  LoadedModel loaded = load_with_cache(*target_file, *target, ops, 64, 5, c.kv, !ops.host_memory());
  ASSERT_TRUE(loaded.model && loaded.cache);
  auto assistant = model::load_assistant(*drafter_file, *drafter, *target_file, *target, ops, 4);
  ASSERT_TRUE(assistant.ok()) << assistant.error().message();
  const std::vector<int32_t> prompt = spread_token_ids(kPrompt);
  const std::vector<float> hidden = prefill_hidden(loaded, prompt, 5, V, NB);
  const std::vector<int32_t> tokens = {7, 300, 41};
  const std::vector<float> expected = reference_steps(f, prompt, tokens, c.kv_name, dir);
  ASSERT_EQ(expected.size(), tokens.size() * V);
  expect_steps_close(draft_steps(**assistant, *loaded.cache, hidden, tokens, kPrompt - 1, V),
                     expected, V, c.tolerance, c.name);
}

}  // namespace testing_util
