// headroom bench on the shipped model: the figures it reports and their link to the plan.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "testing/testing.h"

namespace {

using testing_util::headroom;

nlohmann::json run_json(const std::string& args) {
  std::string out, err;
  EXPECT_EQ(testing_util::run_command(headroom() + " " + args, &out, &err), 0) << err;
  return nlohmann::json::parse(out);
}

TEST(Bench, ReportsPromptAndGenerationSpeedAndTheBytesThePlanPredicts) {
  const auto bench = run_json("bench -r 2 -p 16 -n 8 --json");
  EXPECT_GT(bench["measured_bandwidth_gbps"].get<double>(), 0.1);
  EXPECT_NE(bench["kernels"].get<std::string>().find("cpu kernels"), std::string::npos);
  ASSERT_EQ(bench["results"].size(), 2u);
  const auto& pp = bench["results"][0];
  const auto& tg = bench["results"][1];
  EXPECT_EQ(pp["test"], "pp16");
  EXPECT_EQ(tg["test"], "tg8");
  EXPECT_GT(pp["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(tg["tokens_per_second"].get<double>(), 0);
  EXPECT_GE(tg["sd"].get<double>(), 0);
  // The kernels' ceiling from cache: the shipped model is all F32, so the mix is F32's rate, and
  // the ceiling is the weight bytes of a token at that rate.
  const double f32_gbps = bench["decode_kernel_gbps_in_cache"]["F32"].get<double>();
  EXPECT_GT(f32_gbps, 0);
  EXPECT_DOUBLE_EQ(bench["decode_kernel_mix_gbps_in_cache"].get<double>(), f32_gbps);
  EXPECT_GT(bench["decode_kernel_gbps_from_memory"]["F32"].get<double>(), 0);
  EXPECT_GT(bench["matmul_only_tokens_per_second"].get<double>(), 0);
  EXPECT_NEAR(tg["compute_share"].get<double>(),
              tg["tokens_per_second"].get<double>() /
                  bench["compute_ceiling_tokens_per_second"].get<double>(),
              1e-12);

  // The plan of the same request (context = 16 + 1): bench's bytes per token are the plan's at
  // depth 0 plus the KV cells of the 4 positions the middle of the generated run attends beyond it.
  const auto plan = run_json("plan --ctx 17 --json")["prediction"];
  const double zero = plan["bytes_per_token"].get<double>();
  const double per_position = (plan["bytes_per_token_full_context"].get<double>() - zero) / 16;
  EXPECT_DOUBLE_EQ(tg["bytes_per_token"].get<double>(), zero + 4 * per_position);
  EXPECT_NEAR(tg["achieved_gbps"].get<double>(),
              tg["tokens_per_second"].get<double>() * tg["bytes_per_token"].get<double>() / 1e9,
              1e-9);
}

TEST(Bench, TheScalarReferenceIsAvailableAsABaseline) {
  const auto bench = run_json("bench -r 1 -p 8 -n 4 --backend ref --json");
  EXPECT_NE(bench["kernels"].get<std::string>().find("ref kernels"), std::string::npos);
  // The SIMD kernels' ceiling says nothing about the reference backend: not measured.
  EXPECT_EQ(bench["compute_ceiling_tokens_per_second"].get<double>(), 0);
  EXPECT_EQ(bench["matmul_only_tokens_per_second"].get<double>(), 0);
}

// --draft: generation without drafts, with prompt lookup and with always-right drafts, each a row;
// an always-right draft is always kept. --oracle-drafts needs drafts to verify.
TEST(Bench, DraftedGenerationIsMeasuredBesideThePlainOne) {
  const auto bench = run_json("bench -r 1 -p 0 -n 24 --draft 3 --oracle-drafts --json");
  EXPECT_EQ(bench["draft"], 3);
  ASSERT_EQ(bench["results"].size(), 3u);
  const auto& plain = bench["results"][0];
  const auto& lookup = bench["results"][1];
  const auto& oracle = bench["results"][2];
  EXPECT_FALSE(plain.contains("drafts"));
  EXPECT_EQ(lookup["drafts"], "lookup");
  EXPECT_EQ(oracle["drafts"], "oracle");
  EXPECT_GT(oracle["drafted"].get<int>(), 0);
  EXPECT_EQ(oracle["accepted"], oracle["drafted"]);
  EXPECT_LE(lookup["accepted"].get<int>(), lookup["drafted"].get<int>());
  std::string out, err;
  EXPECT_EQ(testing_util::run_command(headroom() + " bench --oracle-drafts", &out, &err), 2);
  EXPECT_NE(err.find("--draft"), std::string::npos) << err;
}

// --draft-model alone drafts (3 a step): its row is labelled so, and with the model as its own
// draft model every draft is kept, as every always-right one is.
TEST(Bench, ADraftModelIsMeasuredBesideThePlainOneWithoutADraftFlag) {
  const std::string model = (testing_util::temp_dir() / "tiny-e.gguf").string();
  std::string out, err;
  ASSERT_EQ(testing_util::run_command(
                headroom() + " synth --arch gemma4 --shape tiny-e -o " + model, &out, &err),
            0)
      << err;
  const auto bench = run_json("bench -m " + model + " --draft-model " + model +
                              " -r 1 -p 0 -n 24 --oracle-drafts --json");
  EXPECT_EQ(bench["draft"], 3);
  ASSERT_EQ(bench["results"].size(), 3u);
  const auto& drafted = bench["results"][1];
  EXPECT_EQ(drafted["drafts"], "draft-model");
  EXPECT_GT(drafted["drafted"].get<int>(), 0);
  EXPECT_EQ(drafted["accepted"], drafted["drafted"]);
  EXPECT_EQ(bench["results"][2]["drafts"], "oracle");
}

TEST(Bench, BadArgumentsGetOneLine) {
  std::string out, err;
  EXPECT_EQ(testing_util::run_command(headroom() + " bench -r 0", &out, &err), 2);
  EXPECT_TRUE(out.empty());
  EXPECT_NE(err.find("-r"), std::string::npos) << err;
}

}  // namespace
