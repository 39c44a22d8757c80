// The fuzz targets' vocabulary and a short constrained generation.
#include "fuzz_vocabulary.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "gguf/file.h"
#include "sample/constraint.h"
#include "sample/tool_constraint.h"

namespace fuzz {

const tokenizer::Tokenizer& vocabulary() {
  static const std::unique_ptr<tokenizer::Tokenizer> tok = [] {
    const char* path = std::getenv("HEADROOM_FUZZ_MODEL");
    auto file = gguf::File::open(path ? path : HEADROOM_FUZZ_MODEL);
    if (!file) {
      std::fprintf(stderr, "fuzz: %s\n", file.error().message().c_str());
      std::abort();
    }
    auto t = tokenizer::Tokenizer::from_gguf(*file);
    if (!t) {
      std::fprintf(stderr, "fuzz: %s\n", t.error().message().c_str());
      std::abort();
    }
    return std::make_unique<tokenizer::Tokenizer>(std::move(*t));
  }();
  return *tok;
}

namespace {

void run(sample::Constraint& constraint, const tokenizer::Tokenizer& tok) {
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
  std::vector<int32_t> generated;
  for (int step = 0; step < 8; ++step) {
    // Scores that differ per step and token, so different paths through the grammar are taken.
    for (size_t i = 0; i < logits.size(); ++i)
      logits[i] = static_cast<float>((i * 2654435761u + step * 40503u) % 1000);
    constraint.mask(logits, generated);
    int32_t best = -1;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (std::isfinite(logits[i]) && (best < 0 || logits[i] > logits[static_cast<size_t>(best)]))
        best = static_cast<int32_t>(i);
    }
    if (best < 0 || tok.is_end_of_generation(best)) break;
    generated.push_back(best);
  }
  (void)constraint.complete(generated);
}

}  // namespace

void run_response_format(const nlohmann::ordered_json& response_format,
                         const tokenizer::Tokenizer& tok) {
  auto compiled = sample::compile_response_format(response_format, tok);
  if (compiled && *compiled) run(**compiled, tok);
}

void run_tool_calls(const nlohmann::ordered_json& tools, const tokenizer::Tokenizer& tok) {
  sample::ToolCallSpec spec{.syntax = chat::ToolSyntax::kHermes};
  for (const auto& tool : tools) {
    const auto& function = tool["function"];
    spec.functions.push_back({function["name"].get<std::string>(),
                              function.contains("parameters") ? function["parameters"] : nullptr});
  }
  auto compiled = sample::compile_tool_calls(spec, tok);
  if (compiled && *compiled) run(**compiled, tok);
}

}  // namespace fuzz
