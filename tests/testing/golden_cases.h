// The stories260K golden greedy continuations (../shared/models/stories260K.golden.json, made by
// llama.cpp): prompt ids and the ids greedy decoding generates after them to the 128th position.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "testing/testing.h"

namespace testing_util {

struct GoldenCase {
  std::vector<int32_t> prompt, generated;
};

inline std::vector<GoldenCase> golden_greedy_cases() {
  auto g = nlohmann::json::parse(read_text(shared_dir() / "models/stories260K.golden.json"));
  std::vector<GoldenCase> out;
  for (const auto& c : g["cases"]) {
    out.push_back({c["prompt_ids"].get<std::vector<int32_t>>(),
                   c["greedy_generated_ids"].get<std::vector<int32_t>>()});
  }
  return out;
}

}  // namespace testing_util
