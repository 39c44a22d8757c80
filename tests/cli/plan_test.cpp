// headroom plan (and run) with the GPUs a fake libnvidia-ml reports: the GPUs are detected with
// budgets and bandwidths from NVML, named once in a note, and left empty, since headroom cannot
// run on them (the reason depends on the build: no GPU backend, or, with CUDA built, no driver
// behind the fake NVML); without NVML there is no note.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "testing/testing.h"

namespace {

using nlohmann::json;

using testing_util::kGiB;
const std::string kNote = "GPU present (cuda:0 NVIDIA Fake A100, cuda:1 NVIDIA Fake RTX 4090) but ";
const std::string kNoteEnd = ", so the plan places nothing on the GPU";

using testing_util::Ran;

// `headroom ARGS` seeing the GPUs of the NVML library at `nvml_lib`.
Ran headroom_with_nvml(const std::string& nvml_lib, const std::string& args) {
  const testing_util::ScopedEnv nvml("HEADROOM_NVML_LIB", nvml_lib);
  return testing_util::run_headroom(args);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(PlanCli, PresentGpusAreNamedOnceAndGetNoBytes) {
  const Ran text = headroom_with_nvml(FAKE_NVML, "plan --shape gemma4-e2b --ctx 4096");
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_EQ(count(text.out, kNote), 1u) << text.out;
  EXPECT_EQ(count(text.out, kNoteEnd), 1u) << text.out;
  EXPECT_EQ(count(text.out, "note: "), 1u) << text.out;
  // The device table lists only where bytes go; the detected GPUs are described below it.
  EXPECT_EQ(count(text.out, "cuda:0 NVIDIA Fake A100: not used ("), 1u) << text.out;
  EXPECT_EQ(count(text.out, " gpu "), 0u) << "no item is on a GPU:\n" << text.out;

  const Ran j = headroom_with_nvml(FAKE_NVML, "plan --shape gemma4-e2b --ctx 4096 --json");
  ASSERT_EQ(j.rc, 0) << j.err;
  const json plan = json::parse(j.out);
  ASSERT_EQ(plan["devices"].size(), 1u);
  EXPECT_EQ(plan["devices"][0]["kind"], "cpu");
  for (const auto& item : plan["items"]) EXPECT_EQ(item["device"], 0) << item.dump();
  ASSERT_EQ(plan["notes"].size(), 1u);
  EXPECT_EQ(plan["notes"][0].get<std::string>().rfind(kNote, 0), 0u) << plan["notes"];
  ASSERT_EQ(plan["unused_devices"].size(), 2u);
  const json& a100 = plan["unused_devices"][0];
  EXPECT_EQ(a100["name"], "cuda:0 NVIDIA Fake A100");
  EXPECT_EQ(a100["kind"], "gpu");
  EXPECT_EQ(a100["total_bytes"], 40 * kGiB);
  // Free 30 GiB less the margin, 2% of 40 GiB (more than 512 MiB).
  EXPECT_EQ(a100["budget_bytes"], 30 * kGiB - 40 * kGiB / 50);
  // Peak bandwidth: 1215 MHz × 2 × 5120 bits / 8.
  EXPECT_DOUBLE_EQ(a100["bandwidth_bytes_per_s"].get<double>(), 1215e6 * 2 * 5120 / 8);
  EXPECT_NE(a100["bandwidth_source"].get<std::string>().find("PCIe gen 4 x16, 31.5 GB/s"),
            std::string::npos)
      << a100["bandwidth_source"];
  EXPECT_DOUBLE_EQ(plan["unused_devices"][1]["bandwidth_bytes_per_s"].get<double>(),
                   10501e6 * 2 * 384 / 8);
}

TEST(PlanCli, GpuMemSetsTheDetectedBudgetAndWarnsThatItIsNotUsed) {
  const Ran r =
      headroom_with_nvml(FAKE_NVML, "plan --shape gemma4-e2b --ctx 4096 --json --gpu-mem 8G");
  ASSERT_EQ(r.rc, 0) << r.err;
  const json plan = json::parse(r.out);
  EXPECT_EQ(plan["unused_devices"][0]["budget_bytes"], 8 * kGiB);
  EXPECT_EQ(plan["unused_devices"][0]["budget_source"], "--gpu-mem");
  EXPECT_NE(r.err.find("--gpu-mem 8G: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(", so the budget is not used"), std::string::npos) << r.err;
}

TEST(PlanCli, AWhatIfGpuIsStillPlannedBesideAPresentOne) {
  const Ran r = headroom_with_nvml(FAKE_NVML,
                                   "plan --shape gemma4-e2b --ctx 4096 --json --assume-gpu 8G@300");
  ASSERT_EQ(r.rc, 0) << r.err;
  const json plan = json::parse(r.out);
  ASSERT_EQ(plan["devices"].size(), 2u);
  EXPECT_TRUE(plan["devices"][1]["simulated"].get<bool>());
  EXPECT_GT(plan["devices"][1]["planned_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(plan["notes"].size(), 1u);
}

// A prediction for layers on a GPU says it is the roofline, which the CUDA decode is far from; a
// CPU-only one does not.
TEST(PlanCli, AGpuPredictionSaysItIsOnlyTheRoofline) {
  const char* kBound = "on a GPU that is its bandwidth roofline, an upper bound";
  const Ran gpu = headroom_with_nvml("/nonexistent/libnvidia-ml.so.1",
                                     "plan --shape gemma4-e2b --ctx 4096 --assume-gpu 24G@3000");
  ASSERT_EQ(gpu.rc, 0) << gpu.err;
  EXPECT_NE(gpu.out.find(kBound), std::string::npos) << gpu.out;
  const Ran cpu =
      headroom_with_nvml("/nonexistent/libnvidia-ml.so.1", "plan --shape gemma4-e2b --ctx 4096");
  ASSERT_EQ(cpu.rc, 0) << cpu.err;
  EXPECT_EQ(cpu.out.find(kBound), std::string::npos) << cpu.out;
}

TEST(PlanCli, WithoutNvmlThereIsNoGpuAndNoNote) {
  const Ran text =
      headroom_with_nvml("/nonexistent/libnvidia-ml.so.1", "plan --shape gemma4-e2b --ctx 4096");
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_EQ(text.out.find("note:"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("cuda:"), std::string::npos) << text.out;
  const Ran j = headroom_with_nvml("/nonexistent/libnvidia-ml.so.1",
                                   "plan --shape gemma4-e2b --ctx 4096 --json");
  ASSERT_EQ(j.rc, 0) << j.err;
  const json plan = json::parse(j.out);
  EXPECT_TRUE(plan["notes"].empty());
  EXPECT_TRUE(plan["unused_devices"].empty());
  EXPECT_EQ(plan["devices"].size(), 1u);
}

TEST(PlanCli, RunPrintsTheNoteOnceAndGeneratesOnTheCpu) {
  const Ran r = headroom_with_nvml(FAKE_NVML, "run -p 'Once upon a time' -n 8 --temp 0");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(count(r.err, kNote), 1u) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
}

}  // namespace
