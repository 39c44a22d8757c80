// Prefix reuse through the engine: the logits after a reused prefix equal a fresh prefill's within
// the existing tolerances, for every architecture, KV type and micro-batch size — with prefixes
// that end inside a block and continuations whose sliding window reaches into the reused part.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/scheduler.h"
#include "model/synth.h"
#include "testing/testing.h"

namespace {

std::string model_path(const std::string& shape) {
  if (shape == "stories260K")
    return (testing_util::shared_dir() / "models/stories260K.gguf").string();
  const auto path = (testing_util::temp_dir() / (shape + ".gguf")).string();
  auto w = model::synth_writer({.arch = "gemma4", .shape = shape});
  EXPECT_TRUE(w.ok()) << w.error().message();
  EXPECT_TRUE(w->write(path).ok());
  return path;
}

struct Evaluated {
  std::vector<float> logits;  // rows of the positions evaluated
  int n_cached = 0;
};

// One request for `prompt` that reports its prompt logits; `reuse`: from the prefix cache.
Evaluated evaluate(engine::Engine& e, const std::vector<int32_t>& prompt, bool reuse) {
  Evaluated out;
  engine::Scheduler s(e);
  engine::Request r;
  r.prompt = prompt;
  r.max_tokens = 0;
  r.reuse_prefix = reuse;
  r.prompt_logits = [&](int, std::span<const float> row) {
    out.logits.insert(out.logits.end(), row.begin(), row.end());
  };
  r.on_done = [&](engine::FinishReason, const engine::RequestStats& st, const std::string&) {
    out.n_cached = st.n_cached;
  };
  EXPECT_EQ(s.submit(std::move(r)).refusal, engine::Refusal::kNone);
  EXPECT_TRUE(engine::run_until_idle(s).ok());
  return out;
}

struct Case {
  std::string shape;
  tensor::DType kv;
  double tolerance;  // of the largest |logit|
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.shape << " " << gguf::tensor_type_name(c.kv);
}

class PrefixReuse : public ::testing::TestWithParam<Case> {};

// A (40 tokens) runs first; B shares its first 37 — a prefix that ends inside the third block —
// then goes its own way. B reuses A's two whole blocks (32 positions; with the tiny Gemma 4
// window of 8 its first new token attends to positions 25..31, all reused), and its logits from
// position 32 on match B evaluated from scratch. Tolerances: the oracle's for each KV type
// (tests/model/gemma4_oracle_test.cpp) — the reused K/V were computed in other micro-batches, which
// may change f32 rounding, and a quantized cache can round that to a neighbouring level; q4_0 is
// held to q8_0's bound. (The CPU kernels give the same bits whatever the micro-batch: every case
// measures max |Δlogit| = 0 today.)
TEST_P(PrefixReuse, LogitsAfterAReusedPrefixMatchAFreshPrefill) {
  const Case& c = GetParam();
  const std::string path = model_path(c.shape);
  const auto ids = testing_util::spread_token_ids(60);
  const std::vector<int32_t> a(ids.begin(), ids.begin() + 40);
  std::vector<int32_t> b(ids.begin(), ids.begin() + 37);
  b.insert(b.end(), ids.begin() + 45, ids.end());
  for (int ubatch : {1, 5, 64}) {
    SCOPED_TRACE("micro-batch " + std::to_string(ubatch));
    auto e = engine::Engine::load({.model_path = path,
                                   .request = {.n_ctx = 64,
                                               .k_type = c.kv,
                                               .v_type = c.kv,
                                               .n_ubatch = ubatch,
                                               .logits_all_positions = true}});
    ASSERT_TRUE(e.ok()) << e.error().message();
    evaluate(**e, a, true);
    const Evaluated reused = evaluate(**e, b, true);
    ASSERT_EQ(reused.n_cached, 32);
    const Evaluated fresh = evaluate(**e, b, false);
    ASSERT_EQ(fresh.n_cached, 0);
    const size_t V = (*e)->spec().n_vocab;
    ASSERT_EQ(reused.logits.size(), (b.size() - 32) * V);
    double max_abs = 0, max_diff = 0;
    for (size_t i = 0; i < reused.logits.size(); ++i) {
      const float expected = fresh.logits[32 * V + i];
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(expected)));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(reused.logits[i] - expected)));
    }
    std::printf("[ reuse ] %s %s ubatch %d: max |Δlogit| %.3g of max |logit| %.3g\n",
                c.shape.c_str(), std::string(gguf::tensor_type_name(c.kv)).c_str(), ubatch,
                max_diff, max_abs);
    EXPECT_LE(max_diff, c.tolerance * max_abs);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PrefixReuse,
                         ::testing::Values(Case{"stories260K", tensor::DType::kF32, 1e-4},
                                           Case{"stories260K", tensor::DType::kF16, 3e-3},
                                           Case{"stories260K", tensor::DType::kQ8_0, 5e-2},
                                           Case{"stories260K", tensor::DType::kQ4_0, 5e-2},
                                           Case{"tiny-e", tensor::DType::kF32, 1e-4},
                                           Case{"tiny-e", tensor::DType::kF16, 3e-3},
                                           Case{"tiny-e", tensor::DType::kQ8_0, 5e-2},
                                           Case{"tiny-e", tensor::DType::kQ4_0, 5e-2},
                                           Case{"tiny-moe", tensor::DType::kF32, 1e-4},
                                           Case{"tiny-moe", tensor::DType::kQ8_0, 5e-2},
                                           Case{"tiny-dense-keqv", tensor::DType::kF32, 1e-4},
                                           Case{"tiny-dense-keqv", tensor::DType::kQ8_0, 5e-2}),
                         [](const auto& p) {
                           return testing_util::test_name(p.param.shape) + "_" +
                                  std::string(gguf::tensor_type_name(p.param.kv));
                         });

}  // namespace
