// The LoRA flags on the command line: the plan prices the adapter slots and their working memory
// on the device of the layers (a what-if GPU included), run applies one adapter and refuses
// several, bad adapter files and flags fail in one line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "testing/testing.h"

namespace {

using nlohmann::json;

using testing_util::Ran;
using testing_util::run_headroom;

using testing_util::stories_model;

// An adapter for stories260K written with NumPy (tests/reference/write_lora_adapter.py).
std::string write_adapter(const std::filesystem::path& dir, int rank) {
  const auto path = dir / ("adapter-r" + std::to_string(rank) + ".gguf");
  std::string out, err;
  const std::string command = testing_util::python3() + " " +
                              testing_util::reference_script("write_lora_adapter.py").string() +
                              " " + stories_model() + " -o " + path.string() + " --rank " +
                              std::to_string(rank);
  EXPECT_EQ(testing_util::run_command(command, &out, &err), 0) << command << "\n" << err;
  return path.string();
}

uint64_t item_bytes(const json& plan, const std::string& name, int* device = nullptr) {
  for (const auto& item : plan["items"]) {
    if (item["name"] == name) {
      if (device) *device = item["device"];
      return item["bytes"];
    }
  }
  return 0;
}

TEST(LoraCli, PlanPricesTheSlotsWhereTheLayersAre) {
  const auto dir = testing_util::temp_dir();
  const std::string a = write_adapter(dir, 4), b = write_adapter(dir, 8);
  const Ran none = run_headroom("plan -m " + stories_model() + " --json");
  ASSERT_EQ(none.rc, 0) << none.err;
  EXPECT_EQ(item_bytes(json::parse(none.out), "weights: lora adapters"), 0u);

  // Two adapters of ranks 4 and 8, one more slot: three slots of rank 8.
  const Ran two = run_headroom("plan -m " + stories_model() + " --lora " + a + " --lora " + b +
                               ":0.5 --max-loras 3 --json");
  ASSERT_EQ(two.rc, 0) << two.err;
  const json plan = json::parse(two.out);
  EXPECT_EQ(plan["request"]["max_loras"], 3);
  EXPECT_EQ(plan["request"]["max_lora_rank"], 8);
  const uint64_t slots = item_bytes(plan, "weights: lora adapters");
  EXPECT_GT(slots, 0u);
  EXPECT_GT(item_bytes(plan, "lora activations"), 0u);
  EXPECT_EQ(slots % 3, 0u) << "three equal slots";
  const Ran text = run_headroom("plan -m " + stories_model() + " --lora " + a + " --max-loras 2");
  EXPECT_NE(text.out.find("2 LoRA adapter slots of rank ≤ 4"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("weights: lora adapters"), std::string::npos) << text.out;

  // On a (what-if) GPU the slots go where the layers compute, the scales' host side is staged.
  const Ran gpu = run_headroom(
      "plan --shape gemma4-e2b --max-loras 2 --max-lora-rank 16 "
      "--assume-gpu 24G@900 --json");
  ASSERT_EQ(gpu.rc, 0) << gpu.err;
  const json g = json::parse(gpu.out);
  int device = -1;
  EXPECT_GT(item_bytes(g, "weights: lora adapters", &device), 0u);
  EXPECT_EQ(device, 1);
  EXPECT_GT(item_bytes(g, "lora staging (page-locked)"), 0u);
}

TEST(LoraCli, RunAppliesOneAdapterAndBadInputFailsInOneLine) {
  const auto dir = testing_util::temp_dir();
  const std::string a = write_adapter(dir, 4);
  const Ran ok =
      run_headroom("run -m " + stories_model() + " --lora " + a + ":0.5 -p Once -n 4 --temp 0");
  ASSERT_EQ(ok.rc, 0) << ok.err;
  EXPECT_NE(ok.err.find("lora: adapter-r4 (" + a + "): 35 matrices of rank ≤ 4"), std::string::npos)
      << ok.err;
  struct Bad {
    std::string args, expected;
  };
  const std::string b = (dir / "copy" / "other.gguf").string();
  std::filesystem::create_directories(dir / "copy");
  std::filesystem::copy_file(a, b);
  for (const Bad& bad : {
           Bad{"--lora " + a + " --lora " + b, "applies one adapter"},
           Bad{"--lora " + stories_model(), "is not an adapter"},
           Bad{"--lora " + (dir / "missing.gguf").string() + ":2", "missing.gguf"},
       }) {
    const Ran r = run_headroom("run -m " + stories_model() + " -p Once -n 2 " + bad.args);
    EXPECT_EQ(r.rc, 2) << bad.args;
    EXPECT_NE(r.err.find(bad.expected), std::string::npos) << bad.args << ": " << r.err;
    EXPECT_EQ(r.err.find("\n"), r.err.size() - 1) << "one line: " << r.err;
  }
  const Ran planned = run_headroom("plan -m " + stories_model() + " --max-loras 2");
  EXPECT_EQ(planned.rc, 2);
  EXPECT_NE(planned.err.find("--max-lora-rank"), std::string::npos) << planned.err;
}

}  // namespace
