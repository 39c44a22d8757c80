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

#include "hf_oracle.h"
#include "testing/testing.h"

namespace {

namespace fs = std::filesystem;
using testing_util::run_command;
using namespace hf_oracle;

using testing_util::headroom;

struct Converted {
  fs::path ckpt, base, peft;
};

// A checkpoint of `arch`/`variant` (f32), its GGUF, and a PEFT adapter for it.
Converted prepare(const fs::path& dir, const std::string& arch, const std::string& variant,
                  const std::string& adapter_flags = "") {
  Converted c{dir / variant, dir / (variant + ".gguf"), dir / (variant + "-lora")};
  run_or_fail(fmt::format("{} {} --arch {} --variant {} --dtype f32 --shared {} -o {}", python3(),
                          reference_script("write_hf_checkpoint.py"), arch, variant,
                          testing_util::shared_dir().string(), c.ckpt.string()));
  run_or_fail(fmt::format("{} convert {} -o {} --outtype f32", headroom(), c.ckpt.string(),
                          c.base.string()));
  run_or_fail(fmt::format("{} {} {} -o {} {}", python3(), reference_script("write_peft_adapter.py"),
                          c.ckpt.string(), c.peft.string(), adapter_flags));
  return c;
}

struct LoraCase {
  std::string arch, variant;
  int vocab;
  std::string scale;
};

void PrintTo(const LoraCase& c, std::ostream* os) {
  *os << c.variant;
}

class ConvertLora : public testing::TestWithParam<LoraCase> {};

TEST_P(ConvertLora, AdapterLogitsEqualMergedCheckpointReference) {
  const LoraCase& c = GetParam();
  const fs::path dir = testing_util::temp_dir();
  const Converted conv = prepare(dir, c.arch, c.variant);
  const fs::path adapter = dir / "adapter.gguf";
  run_or_fail(fmt::format("{} convert --lora {} --base {} -o {}", headroom(), conv.peft.string(),
                          conv.base.string(), adapter.string()));
  const std::string ids = ids_text(20, c.vocab, 4242);
  const fs::path ref = dir / "ref.f32", ref_base = dir / "ref-base.f32", got = dir / "got.f32";
  run_or_fail(fmt::format("{} {} {} --ids {} -o {} --lora {} --lora-scale {}", python3(),
                          reference_script("hf_reference.py"), conv.ckpt.string(), ids,
                          ref.string(), conv.peft.string(), c.scale));
  run_or_fail(fmt::format("{} {} {} --ids {} -o {}", python3(), reference_script("hf_reference.py"),
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
                         testing::Values(LoraCase{"llama", "tiny", 32000, "1"},
                                         LoraCase{"gemma4", "tiny-e", 512, "0.5"}),
                         [](const auto& p) { return testing_util::test_name(p.param.variant); });

// Each bad adapter: a one-line error naming the file and the tensor, exit status 2, no output.
TEST(ConvertLoraErrors, BadAdaptersFailInOneLineAndLeaveNothing) {
  const fs::path dir = testing_util::temp_dir();
  const Converted llama = prepare(dir, "llama", "tiny");
  const Converted gemma = prepare(dir, "gemma4", "tiny-e");
  const fs::path dora = dir / "dora";
  run_or_fail(fmt::format("{} {} {} -o {} --dora", python3(),
                          reference_script("write_peft_adapter.py"), llama.ckpt.string(),
                          dora.string()));
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
