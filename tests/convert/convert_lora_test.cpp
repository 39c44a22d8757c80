// headroom convert --lora on PEFT adapters written here with NumPy
// (tests/reference/write_peft_adapter.py) for Hugging Face checkpoints also written here: the
// converted base model run with the converted adapter gives the logits of an independent float64
// forward pass over the checkpoint's own tensors with the adapter merged PEFT's way
// (tests/reference/hf_reference.py --lora), for llama (whose Q/K rows the converter permutes) and
// Gemma 4 (with KV-shared layers); bad adapters fail in one line naming the file and tensor and
// leave nothing behind.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "testing/testing.h"

namespace {

namespace fs = std::filesystem;
using testing_util::run_command;

constexpr const char* kPython = "/usr/bin/python3";
// The checkpoint oracle's tolerance (convert_checkpoint_test.cpp): 1e-4 of the largest logit.
constexpr double kTol = 1e-4;

std::string script(const char* name) {
  return (testing_util::source_dir() / "tests/reference" / name).string();
}
std::string headroom() {
  return testing_util::headroom_binary().string();
}

void run_or_fail(const std::string& command) {
  std::string out, err;
  ASSERT_EQ(run_command(command, &out, &err), 0) << command << "\n" << out << err;
}

struct Converted {
  fs::path ckpt, base, peft;
};

// A checkpoint of `arch`/`variant` (f32), its GGUF, and a PEFT adapter for it.
Converted prepare(const fs::path& dir, const std::string& arch, const std::string& variant,
                  const std::string& adapter_flags = "") {
  Converted c{dir / variant, dir / (variant + ".gguf"), dir / (variant + "-lora")};
  run_or_fail(fmt::format("{} {} --arch {} --variant {} --dtype f32 --shared {} -o {}", kPython,
                          script("write_hf_checkpoint.py"), arch, variant,
                          testing_util::shared_dir().string(), c.ckpt.string()));
  run_or_fail(fmt::format("{} convert {} -o {} --outtype f32", headroom(), c.ckpt.string(),
                          c.base.string()));
  run_or_fail(fmt::format("{} {} {} -o {} {}", kPython, script("write_peft_adapter.py"),
                          c.ckpt.string(), c.peft.string(), adapter_flags));
  return c;
}

std::string ids_text(int n, int vocab) {
  std::string s;
  uint32_t state = 4242;
  for (int i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    if (i) s += ',';
    s += std::to_string((state >> 8) % vocab);
  }
  return s;
}

double relative(const std::vector<float>& ref, const std::vector<float>& got) {
  EXPECT_EQ(ref.size(), got.size());
  double max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < std::min(ref.size(), got.size()); ++i) {
    max_abs = std::max(max_abs, std::fabs(double(ref[i])));
    max_diff = std::max(max_diff, std::fabs(double(ref[i]) - got[i]));
  }
  return max_abs > 0 ? max_diff / max_abs : 1.0;
}

struct Case {
  std::string arch, variant;
  int vocab;
  std::string scale;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.variant;
}

class ConvertLora : public testing::TestWithParam<Case> {};

TEST_P(ConvertLora, AdapterLogitsEqualMergedCheckpointReference) {
  const Case& c = GetParam();
  const fs::path dir = testing_util::temp_dir();
  const Converted conv = prepare(dir, c.arch, c.variant);
  const fs::path adapter = dir / "adapter.gguf";
  run_or_fail(fmt::format("{} convert --lora {} --base {} -o {}", headroom(), conv.peft.string(),
                          conv.base.string(), adapter.string()));
  const std::string ids = ids_text(20, c.vocab);
  const fs::path ref = dir / "ref.f32", ref_base = dir / "ref-base.f32", got = dir / "got.f32";
  run_or_fail(fmt::format("{} {} {} --ids {} -o {} --lora {} --lora-scale {}", kPython,
                          script("hf_reference.py"), conv.ckpt.string(), ids, ref.string(),
                          conv.peft.string(), c.scale));
  run_or_fail(fmt::format("{} {} {} --ids {} -o {}", kPython, script("hf_reference.py"),
                          conv.ckpt.string(), ids, ref_base.string()));
  for (const std::string mode : {"--ubatch 7", "--decode"}) {
    run_or_fail(fmt::format("{} logits -m {} --ids {} {} --lora {}:{} -o {}", headroom(),
                            conv.base.string(), ids, mode, adapter.string(), c.scale,
                            got.string()));
    const auto expected = testing_util::read_f32(ref);
    const double moved = relative(expected, testing_util::read_f32(ref_base));
    const double rel = relative(expected, testing_util::read_f32(got));
    std::printf("[ convert --lora ] %s %s: relative error %.3g (the adapter moves %.3g)\n",
                c.variant.c_str(), mode.c_str(), rel, moved);
    EXPECT_GT(moved, 100 * kTol) << "the adapter hardly changes the logits";
    EXPECT_LE(rel, kTol) << mode;
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, ConvertLora,
                         testing::Values(Case{"llama", "tiny", 32000, "1"},
                                         Case{"gemma4", "tiny-e", 512, "0.5"}),
                         [](const auto& p) { return testing_util::test_name(p.param.variant); });

// Each bad adapter: a one-line error naming the file and the tensor, exit status 2, no output.
TEST(ConvertLoraErrors, BadAdaptersFailInOneLineAndLeaveNothing) {
  const fs::path dir = testing_util::temp_dir();
  const Converted llama = prepare(dir, "llama", "tiny");
  const Converted gemma = prepare(dir, "gemma4", "tiny-e");
  const fs::path dora = dir / "dora";
  run_or_fail(fmt::format("{} {} {} -o {} --dora", kPython, script("write_peft_adapter.py"),
                          llama.ckpt.string(), dora.string()));
  struct Bad {
    std::string what, peft, base, expected;
  };
  const Bad cases[] = {
      {"an adapter for another base model", gemma.peft.string(), llama.base.string(),
       "another base model"},
      {"DoRA", dora.string(), llama.base.string(), "DoRA"},
      {"no base", llama.peft.string(), "", "--base"},
      {"not a PEFT directory", llama.ckpt.string(), llama.base.string(), "adapter_config.json"},
  };
  for (const Bad& b : cases) {
    const fs::path out = dir / "bad.gguf";
    std::string stdout_text, stderr_text;
    const int rc = run_command(fmt::format("{} convert --lora {} {} -o {}", headroom(), b.peft,
                                           b.base.empty() ? "" : "--base " + b.base, out.string()),
                               &stdout_text, &stderr_text);
    EXPECT_EQ(rc, 2) << b.what;
    EXPECT_NE(stderr_text.find(b.expected), std::string::npos) << b.what << ": " << stderr_text;
    EXPECT_EQ(std::count(stderr_text.begin(), stderr_text.end(), '\n'), 1)
        << b.what << ": " << stderr_text;
    EXPECT_FALSE(fs::exists(out)) << b.what;
  }
}

}  // namespace
