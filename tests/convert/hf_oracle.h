// What the checkpoint and adapter conversion tests share: the float64 reference scripts
// (tests/reference) they run, the token ids they run them on, and how the logits are compared.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace hf_oracle {

using testing_util::python3;
// f32 arithmetic on the very values the f64 reference reads: the tolerance of the model oracle
// tests (tests/model/gemma4_oracle_test.cpp), 1e-4 of the largest logit.
inline constexpr double kTol = 1e-4;

inline std::string reference_script(const char* name) {
  return testing_util::reference_script(name).string();
}

inline void run_or_fail(const std::string& command) {
  std::string out, err;
  ASSERT_EQ(testing_util::run_command(command, &out, &err), 0) << command << "\n" << out << err;
}

// n token ids below `vocab` from a linear congruential generator seeded with `seed`, as the
// reference script's --ids takes them ("3,17,…").
inline std::string ids_text(int n, int vocab, uint32_t seed) {
  std::string s;
  uint32_t state = seed;
  for (int i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    if (i) s += ',';
    s += std::to_string((state >> 8) % vocab);
  }
  return s;
}

// max |Δ| / max |ref| over the logits.
inline double relative(const std::vector<float>& ref, const std::vector<float>& got) {
  EXPECT_EQ(ref.size(), got.size());
  double max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < std::min(ref.size(), got.size()); ++i) {
    max_abs = std::max(max_abs, std::fabs(double(ref[i])));
    max_diff = std::max(max_diff, std::fabs(double(ref[i]) - got[i]));
  }
  return max_abs > 0 ? max_diff / max_abs : 1.0;
}

}  // namespace hf_oracle
