// Constrained decoding cost: one step's token mask on a real 262K vocabulary (the Gemma-style
// ggml-vocab-gemma-3-reconstructed.gguf), for response_format JSON and for forced tool calls in
// Gemma 4's and Hermes' syntax, at the states that matter: where the walk covers the whole
// vocabulary (an object's start, a call's start) and inside a string (the shortcut that decides
// plain tokens by their length).
//
// Build (Release) and run:
//   cmake --build build --target constraint_bench && build/bench/sample/constraint_bench
// Each iteration is one mask() on a fixed prefix: what the sampler pays per generated token.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "gguf/file.h"
#include "sample/constraint.h"
#include "sample/tool_constraint.h"

namespace {

const tokenizer::Tokenizer& vocab() {
  static const tokenizer::Tokenizer tok = [] {
    auto file = gguf::File::open(std::string(HEADROOM_SHARED_DIR) +
                                 "/models/vocab/ggml-vocab-gemma-3-reconstructed.gguf");
    if (!file) throw std::runtime_error(file.error().message());
    auto t = tokenizer::Tokenizer::from_gguf(*file);
    if (!t) throw std::runtime_error(t.error().message());
    return std::move(*t);
  }();
  return tok;
}

// The tokenizer's tokens of `text`: a prefix the model could have written.
std::vector<int32_t> tokens_of(std::string_view text) {
  const auto& tok = vocab();
  return tok.encode(text, {.add_bos = false, .parse_special = false});
}

const nlohmann::ordered_json kParameters = nlohmann::ordered_json::parse(R"({"type": "object",
  "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14},
  "notes": {"type": "array", "items": {"type": "string"}}}, "required": ["city", "days"]})");

void run_mask(benchmark::State& state, sample::Constraint& c, const std::vector<int32_t>& prefix) {
  std::vector<float> logits(vocab().n_vocab(), 0.0f);
  for (auto _ : state) {
    c.mask(logits, prefix);
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["vocab"] = vocab().n_vocab();
}

void BM_JsonMask(benchmark::State& state, const char* prefix) {
  nlohmann::ordered_json rf = {{"type", "json_schema"}, {"json_schema", {{"schema", kParameters}}}};
  auto c = sample::compile_response_format(rf, vocab());
  if (!c) return state.SkipWithError(c.error().message().c_str());
  run_mask(state, **c, tokens_of(prefix));
}

void BM_ToolMask(benchmark::State& state, chat::ToolSyntax syntax, const char* prefix) {
  auto c = sample::compile_tool_calls(
      {.syntax = syntax, .functions = {{"get_weather", kParameters}}}, vocab());
  if (!c) return state.SkipWithError(c.error().message().c_str());
  run_mask(state, **c, tokens_of(prefix));
}

BENCHMARK_CAPTURE(BM_JsonMask, object_start, "")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_JsonMask, in_string, "{\"city\": \"Par")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ToolMask, gemma4_call_start, chat::ToolSyntax::kGemma4, "")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ToolMask, gemma4_in_string, chat::ToolSyntax::kGemma4,
                  "<|tool_call>call:get_weather{city:<|\"|>Par")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ToolMask, gemma4_after_value, chat::ToolSyntax::kGemma4,
                  "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ToolMask, hermes_in_string, chat::ToolSyntax::kHermes,
                  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par")
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
