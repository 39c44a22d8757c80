// headroom convert on Hugging Face checkpoints written here with numpy
// (tests/reference/write_hf_checkpoint.py): the converted GGUF, run by headroom, gives the logits
// of an independent float64 forward pass over the checkpoint's own tensors
// (tests/reference/hf_reference.py), for llama and Gemma 4, single-file and sharded, BF16, F16 and
// F32; bad checkpoints fail with one line naming the file and tensor and leave nothing behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "gguf/file.h"
#include "hf_oracle.h"
#include "testing/testing.h"

namespace {

namespace fs = std::filesystem;
using testing_util::run_command;
using namespace hf_oracle;

using testing_util::headroom;

// Writes a checkpoint of `arch`/`variant` into dir/name.
fs::path write_checkpoint(const fs::path& dir, const std::string& arch, const std::string& variant,
                          const std::string& dtype, int shards) {
  const fs::path out = dir / (variant + "-" + dtype);
  run_or_fail(fmt::format("{} {} --arch {} --variant {} --dtype {} --shards {} --shared {} -o {}",
                          python3(), reference_script("write_hf_checkpoint.py"), arch, variant,
                          dtype, shards, testing_util::shared_dir().string(), out.string()));
  return out;
}

// Converts `ckpt` with `flags`, runs both sides over `ids` and returns max |Δ| / max |logit|.
double relative_error(const fs::path& ckpt, const std::string& flags, const std::string& ids) {
  const fs::path gguf = ckpt.string() + "-" + std::to_string(flags.size()) + ".gguf";
  std::string out, err;
  const std::string convert =
      fmt::format("{} convert {} -o {} {}", headroom(), ckpt.string(), gguf.string(), flags);
  EXPECT_EQ(run_command(convert, &out, &err), 0) << convert << "\n" << out << err;
  run_or_fail(fmt::format("{} {} {} --ids {} -o {}.ref", python3(),
                          reference_script("hf_reference.py"), ckpt.string(), ids, gguf.string()));
  run_or_fail(fmt::format("{} logits -m {} --ids {} -o {}.out", headroom(), gguf.string(), ids,
                          gguf.string()));
  return relative(testing_util::read_f32(gguf.string() + ".ref"),
                  testing_util::read_f32(gguf.string() + ".out"));
}

struct CheckpointCase {
  std::string arch, variant, dtype;
  int shards;
  std::string flags;  // convert flags
  int vocab;
};

void PrintTo(const CheckpointCase& c, std::ostream* os) {
  *os << c.variant << "-" << c.dtype;
}

class ConvertCheckpoint : public testing::TestWithParam<CheckpointCase> {};

TEST_P(ConvertCheckpoint, LogitsEqualReferenceOnCheckpointTensors) {
  const CheckpointCase& c = GetParam();
  const auto dir = testing_util::temp_dir();
  const fs::path ckpt = write_checkpoint(dir, c.arch, c.variant, c.dtype, c.shards);
  // 20 tokens: past the tiny Gemma 4 window of 8 twice.
  const double rel = relative_error(ckpt, c.flags, ids_text(20, c.vocab, 777));
  RecordProperty("relative_error", std::to_string(rel));
  EXPECT_LE(rel, kTol) << "max |Δlogit| / max |logit|";
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, ConvertCheckpoint,
    testing::Values(
        // Sharded BF16 llama, written as BF16 (auto: the checkpoint's bytes copied) and as F32.
        CheckpointCase{"llama", "tiny", "bf16", 2, "", 32000},
        CheckpointCase{"llama", "tiny", "bf16", 2, "--outtype f32", 32000},
        // Llama 3 RoPE scaling (rope_freqs) and tied embeddings, F32 checkpoint kept F32 (auto
        // would write F16, as llama.cpp's converter does, and round the weights).
        CheckpointCase{"llama", "tiny-llama3", "f32", 1, "--outtype f32", 32000},
        // Gemma 4 E-like: multimodal wrapper, PLE, KV sharing, double-wide MLP; sharded BF16.
        CheckpointCase{"gemma4", "tiny-e", "bf16", 2, "", 512},
        // Gemma 4 MoE-like: experts, k_eq_v, per-type KV heads; F16 checkpoint.
        CheckpointCase{"gemma4", "tiny-moe", "f16", 1, "", 512}),
    [](const auto& p) {
      return testing_util::test_name(p.param.variant + "_" + p.param.dtype +
                                     (p.param.flags.empty() ? "" : "_f32"));
    });

// One step (convert --outtype q8_0) writes the very file two steps (convert --outtype f32, then
// quantize --type q8_0) write.
TEST(ConvertCheckpointOneStep, EqualsConvertThenQuantize) {
  const auto dir = testing_util::temp_dir();
  const fs::path ckpt = write_checkpoint(dir, "llama", "tiny", "bf16", 1);
  const std::string one = (dir / "one.gguf").string(), f32 = (dir / "f32.gguf").string(),
                    two = (dir / "two.gguf").string();
  run_or_fail(fmt::format("{} convert {} -o {} --outtype q8_0", headroom(), ckpt.string(), one));
  run_or_fail(fmt::format("{} convert {} -o {} --outtype f32", headroom(), ckpt.string(), f32));
  run_or_fail(fmt::format("{} quantize {} {} --type q8_0", headroom(), f32, two));
  EXPECT_TRUE(testing_util::read_file(one) == testing_util::read_file(two));
}

// The metadata keys and tensor names llama.cpp's converter writes (spec §3.2, §3.3).
TEST(ConvertCheckpointMetadata, Gemma4KeysAndNames) {
  const auto dir = testing_util::temp_dir();
  const fs::path ckpt = write_checkpoint(dir, "gemma4", "tiny-e", "bf16", 1);
  const std::string out = (dir / "e.gguf").string();
  run_or_fail(fmt::format("{} convert {} -o {}", headroom(), ckpt.string(), out));
  auto f = gguf::File::open(out);
  ASSERT_TRUE(f.ok());
  for (const char* key : {"general.architecture",
                          "gemma4.block_count",
                          "gemma4.embedding_length",
                          "gemma4.feed_forward_length",
                          "gemma4.attention.head_count",
                          "gemma4.attention.head_count_kv",
                          "gemma4.attention.key_length",
                          "gemma4.attention.key_length_swa",
                          "gemma4.attention.value_length_swa",
                          "gemma4.attention.layer_norm_rms_epsilon",
                          "gemma4.attention.sliding_window",
                          "gemma4.attention.sliding_window_pattern",
                          "gemma4.attention.shared_kv_layers",
                          "gemma4.embedding_length_per_layer_input",
                          "gemma4.rope.freq_base",
                          "gemma4.rope.freq_base_swa",
                          "gemma4.rope.dimension_count",
                          "gemma4.rope.dimension_count_swa",
                          "gemma4.final_logit_softcapping",
                          "tokenizer.ggml.model",
                          "tokenizer.ggml.tokens",
                          "tokenizer.ggml.merges",
                          "tokenizer.ggml.token_type",
                          "tokenizer.ggml.bos_token_id",
                          "tokenizer.chat_template"}) {
    EXPECT_NE(f->find(key), nullptr) << key;
  }
  EXPECT_EQ(*f->get_string("tokenizer.ggml.model").value(), "gemma4");
  EXPECT_EQ(*f->get_u64("tokenizer.ggml.eos_token_id").value(), 511u);  // <turn|>
  for (const char* name : {"token_embd.weight", "rope_freqs.weight", "per_layer_token_embd.weight",
                           "per_layer_model_proj.weight", "per_layer_proj_norm.weight",
                           "blk.7.layer_output_scale.weight", "blk.0.inp_gate.weight",
                           "blk.0.proj.weight", "blk.0.post_norm.weight", "output_norm.weight"}) {
    EXPECT_NE(f->find_tensor(name), nullptr) << name;
  }
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);  // tied
  EXPECT_EQ(f->find_tensor("blk.0.attn_norm.weight")->type, gguf::TensorType::kF32);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, gguf::TensorType::kBF16);
  // No vision tensor made it into the text model.
  for (const auto& t : f->tensors()) EXPECT_EQ(t.name.find("vision"), std::string_view::npos);
}

// Bad checkpoints: one line naming the file and tensor, and no output (nor temporary) file.
class ConvertBadCheckpoint : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_util::temp_dir();
    ckpt_ = write_checkpoint(dir_, "llama", "tiny", "f32", 2);
  }
  // Runs convert, expects failure with every `needles` in the one-line error, and nothing written.
  void expect_error(const std::vector<std::string>& needles) {
    const fs::path out = dir_ / "out" / "model.gguf";
    fs::create_directories(out.parent_path());
    std::string stdout_text, err;
    const int rc =
        run_command(fmt::format("{} convert {} -o {}", headroom(), ckpt_.string(), out.string()),
                    &stdout_text, &err);
    EXPECT_EQ(rc, 2) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    for (const std::string& n : needles)
      EXPECT_NE(err.find(n), std::string::npos) << n << " in " << err;
    EXPECT_TRUE(fs::is_empty(out.parent_path())) << "something was left in " << out.parent_path();
  }
  void edit_config(const std::string& from, const std::string& to) {
    std::string text = testing_util::read_text(ckpt_ / "config.json");
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    std::ofstream(ckpt_ / "config.json") << text;
  }
  fs::path dir_, ckpt_;
};

TEST_F(ConvertBadCheckpoint, MissingShard) {
  fs::remove(ckpt_ / "model-00002-of-00002.safetensors");
  expect_error({"model-00002-of-00002.safetensors", "is missing", "model.layers."});
}

TEST_F(ConvertBadCheckpoint, ShapeMismatch) {
  edit_config("\"intermediate_size\": 96", "\"intermediate_size\": 128");
  expect_error({"model.layers.0.mlp.gate_proj.weight", "model-0000", "[96, 64]", "[128, 64]"});
}

TEST_F(ConvertBadCheckpoint, UnsupportedArchitecture) {
  edit_config("LlamaForCausalLM", "GPT2LMHeadModel");
  expect_error({"config.json", "GPT2LMHeadModel", "not supported"});
}

TEST_F(ConvertBadCheckpoint, TruncatedShard) {
  const fs::path shard = ckpt_ / "model-00002-of-00002.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 16);  // the last tensor runs past the end
  expect_error({"model-00002-of-00002.safetensors", "model.norm.weight", "truncated"});
}

TEST_F(ConvertBadCheckpoint, TensorOfAnotherModel) {
  // A shard swapped for one of a different model: the index's tensor is not where it says.
  const fs::path other = write_checkpoint(dir_, "llama", "tiny-llama3", "f32", 1);
  fs::copy_file(other / "model.safetensors", ckpt_ / "model-00002-of-00002.safetensors",
                fs::copy_options::overwrite_existing);
  expect_error({"model-00002-of-00002.safetensors"});
}

}  // namespace
