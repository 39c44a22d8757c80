// headroom inspect, run as a user runs it: text and JSON on real and written files, bad files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gguf/writer.h"
#include "testing/testing.h"

namespace {

using nlohmann::json;
using testing_util::Ran;

Ran inspect(const std::string& args) {
  return testing_util::run_headroom("inspect " + args);
}

using testing_util::stories_model;

// Runs of spaces collapsed to one, so assertions read values rather than column widths.
std::string squash(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' && !out.empty() && out.back() == ' ') continue;
    out += c;
  }
  return out;
}

TEST(InspectCli, TextOnStories260K) {
  Ran r = inspect(stories_model());
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string text = squash(r.out);
  for (const char* expected : {
           "GGUF v3, 1185376 B (1.13 MiB), alignment 32, tensor data at byte 14176",
           "Metadata: 19 keys",
           "general.architecture string \"llama\"",
           "llama.attention.head_count_kv u32 4",
           "llama.attention.layer_norm_rms_epsilon f32 1e-05",
           "tokenizer.ggml.tokens string[512] [\"<unk>\", \"<s>\", \"</s>\", \"<0x00>\"",
           "… 504 more]",
           "Tensors: 48 ",
           "token_embd.weight F32 64 x 512 32768 131072 0\n",
           "blk.4.ffn_norm.weight F32 64 64 256 1170944\n",
           "F32 48 tensors 292800 parameters 1171200 B (1.12 MiB)",
           "token embedding 1 tensor 32768 parameters",
           "attention 20 tensors 61440 parameters",
           "feed-forward 15 tensors 165120 parameters",
           "norms 11 tensors 704 parameters",
           "output 1 tensor 32768 parameters",
           "total 48 tensors 292800 parameters 1171200 B",
           "Architecture: llama (\"llama\") — 5 layers, embedding 64, vocabulary 512, context 2048",
           // 5 full layers of 8 heads, 4 KV heads of dim 8: 2 × 4 × 8 × 2 B = 128 B per layer.
           "full 8 4 8 - 5 640 0-4\n",
           "sliding pattern: FFFFF (all layers full attention)",
           "shared-KV layers: none",
           "KV cache per token (F16): 640 B",
           " 3 full 8 4 8 - 3 128 172 10000.0 8\n",
       }) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing: " << expected << "\n" << r.out;
  }
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(InspectCli, JsonOnStories260K) {
  Ran r = inspect(stories_model() + " --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["file_bytes"], 1185376);
  EXPECT_EQ(j["gguf_version"], 3);
  EXPECT_EQ(j["data_offset"], 14176);
  EXPECT_EQ(j["metadata"].size(), 19u);
  EXPECT_EQ(j["metadata"]["llama.block_count"]["type"], "u32");
  EXPECT_EQ(j["metadata"]["llama.block_count"]["value"], 5);
  EXPECT_EQ(j["metadata"]["llama.attention.layer_norm_rms_epsilon"]["value"], 1e-05);
  const json& tokens = j["metadata"]["tokenizer.ggml.tokens"];
  EXPECT_EQ(tokens["type"], "array");
  EXPECT_EQ(tokens["element_type"], "string");
  EXPECT_EQ(tokens["length"], 512);
  ASSERT_EQ(tokens["values"].size(), 8u);  // long arrays are summarised
  EXPECT_EQ(tokens["values"][1], "<s>");

  ASSERT_EQ(j["tensors"].size(), 48u);
  const json& embd = j["tensors"][0];
  EXPECT_EQ(embd["name"], "token_embd.weight");
  EXPECT_EQ(embd["type"], "F32");
  EXPECT_EQ(embd["shape"], json::array({64, 512}));
  EXPECT_EQ(embd["bytes"], 131072);
  EXPECT_EQ(embd["file_offset"], 14176);
  EXPECT_EQ(embd["class"], "token embedding");
  EXPECT_EQ(j["tensors"][47]["layer"], 4);

  const json& totals = j["totals"];
  EXPECT_EQ(totals["tensors"], 48);
  EXPECT_EQ(totals["parameters"], 292800);
  EXPECT_EQ(totals["bytes"], 292800 * 4);
  ASSERT_EQ(totals["by_type"].size(), 1u);
  EXPECT_EQ(totals["by_type"][0]["type"], "F32");
  ASSERT_EQ(totals["by_class"].size(), 8u);
  uint64_t class_parameters = 0;
  for (const auto& c : totals["by_class"]) class_parameters += c["parameters"].get<uint64_t>();
  EXPECT_EQ(class_parameters, 292800u);
  EXPECT_EQ(totals["by_class"][0]["class"], "token embedding");
  EXPECT_EQ(totals["by_class"][0]["parameters"], 32768);

  const json& a = j["architecture"];
  EXPECT_EQ(a["name"], "llama");
  EXPECT_EQ(a["layers"], 5);
  EXPECT_EQ(a["embedding_length"], 64);
  EXPECT_EQ(a["vocab_size"], 512);
  EXPECT_EQ(a["sliding_pattern"], "FFFFF");
  EXPECT_EQ(a["shared_kv_layers"], json::array());
  EXPECT_EQ(a["kv_bytes_per_token"]["total"], 640);
  ASSERT_EQ(a["attention_groups"].size(), 1u);
  EXPECT_EQ(a["attention_groups"][0]["layers"], json::array({0, 1, 2, 3, 4}));
  ASSERT_EQ(a["per_layer"].size(), 5u);
  for (const auto& l : a["per_layer"]) {
    EXPECT_EQ(l["attention"], "full");
    EXPECT_EQ(l["heads"], 8);
    EXPECT_EQ(l["kv_heads"], 4);
    EXPECT_EQ(l["head_dim"], 8);
    EXPECT_EQ(l["kv_source"], l["layer"]);
    EXPECT_EQ(l["ffn_length"], 172);
    EXPECT_EQ(l["rope_dims"], 8);
  }
}

// spec §7.1 tiny-e: sliding/full layers with different head dims, KV sharing of both kinds.
std::string write_tiny_e(const std::filesystem::path& dir, std::vector<float>& rope_freqs) {
  gguf::Writer w;
  const uint32_t n_ff[] = {256, 256, 256, 256, 256, 512, 512, 512};
  w.set("general.architecture", gguf::MetaValue::string("gemma4"));
  w.set("general.name", gguf::MetaValue::string("tiny-e"));
  w.set("gemma4.block_count", gguf::MetaValue::u32(8));
  w.set("gemma4.context_length", gguf::MetaValue::u32(256));
  w.set("gemma4.embedding_length", gguf::MetaValue::u32(128));
  w.set("gemma4.feed_forward_length", gguf::MetaValue::array_u32(n_ff));
  w.set("gemma4.attention.head_count", gguf::MetaValue::u32(4));
  w.set("gemma4.attention.head_count_kv", gguf::MetaValue::u32(2));
  w.set("gemma4.attention.key_length", gguf::MetaValue::u32(64));
  w.set("gemma4.attention.key_length_swa", gguf::MetaValue::u32(32));
  w.set("gemma4.attention.sliding_window", gguf::MetaValue::u32(8));
  w.set("gemma4.attention.sliding_window_pattern",
        gguf::MetaValue::array_bool({true, true, false, true, false, true, true, false}));
  w.set("gemma4.attention.shared_kv_layers", gguf::MetaValue::u32(3));
  w.set("gemma4.embedding_length_per_layer_input", gguf::MetaValue::u32(16));
  w.set("gemma4.rope.freq_base", gguf::MetaValue::f32(1e6f));
  w.set("gemma4.rope.freq_base_swa", gguf::MetaValue::f32(1e4f));
  w.set("gemma4.final_logit_softcapping", gguf::MetaValue::f32(30.0f));
  const auto zeros = [](std::span<uint8_t> out) -> util::Status {
    std::fill(out.begin(), out.end(), 0);
    return {};
  };
  w.add_tensor("token_embd.weight", gguf::TensorType::kQ8_0, {128, 512}, zeros);
  w.add_tensor("per_layer_token_embd.weight", gguf::TensorType::kQ8_0, {128, 512}, zeros);
  rope_freqs.assign(32, 1e30f);
  std::fill(rope_freqs.begin(), rope_freqs.begin() + 8, 1.0f);
  w.add_tensor("rope_freqs.weight", gguf::TensorType::kF32, {32},
               std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(rope_freqs.data()), 128));
  w.add_tensor("blk.2.attn_q.weight", gguf::TensorType::kF16, {128, 256}, zeros);
  w.add_tensor("blk.2.attn_q_norm.weight", gguf::TensorType::kF32, {64}, zeros);
  const std::string path = (dir / "tiny-e.gguf").string();
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

TEST(InspectCli, Gemma4KvGeometryAndSharing) {
  std::vector<float> rope_freqs;
  const std::string path = write_tiny_e(testing_util::temp_dir(), rope_freqs);
  Ran r = inspect(path + " --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const json a = json::parse(r.out)["architecture"];
  ASSERT_FALSE(a.contains("error")) << a["error"];
  EXPECT_EQ(a["name"], "gemma4");
  EXPECT_EQ(a["layers"], 8);
  EXPECT_EQ(a["per_layer_embedding_length"], 16);
  EXPECT_EQ(a["sliding_pattern"], "SSFSFSSF");
  EXPECT_EQ(a["sliding_window"], 8);
  EXPECT_EQ(a["shared_kv_layers"], json::array({5, 6, 7}));
  // Owning layers: sliding 0, 1, 3 at 2 × 2 heads × 32 × 2 B = 256 B each; full 2, 4 at
  // 2 × 2 × 64 × 2 B = 512 B each; shared layers 5-7 add nothing.
  EXPECT_EQ(a["kv_bytes_per_token"]["sliding_layers"], 768);
  EXPECT_EQ(a["kv_bytes_per_token"]["full_layers"], 1024);
  EXPECT_EQ(a["kv_bytes_per_token"]["total"], 1792);
  const json& layers = a["per_layer"];
  ASSERT_EQ(layers.size(), 8u);
  EXPECT_EQ(layers[0]["attention"], "sliding");
  EXPECT_EQ(layers[0]["head_dim"], 32);
  EXPECT_EQ(layers[0]["window"], 8);
  EXPECT_EQ(layers[2]["attention"], "full");
  EXPECT_EQ(layers[2]["head_dim"], 64);
  EXPECT_EQ(layers[2]["window"], 0);
  EXPECT_EQ(layers[5]["kv_source"], 3);  // shared sliding → last sliding owner
  EXPECT_EQ(layers[6]["kv_source"], 3);
  EXPECT_EQ(layers[7]["kv_source"], 4);  // shared full → last full owner
  EXPECT_EQ(layers[7]["kv_bytes_per_token"], 0);
  EXPECT_EQ(layers[7]["ffn_length"], 512);
  EXPECT_EQ(layers[2]["rope_theta"], 1e6);
  EXPECT_EQ(layers[0]["rope_theta"], 1e4);
  ASSERT_EQ(a["attention_groups"].size(), 2u);
  EXPECT_EQ(a["attention_groups"][0]["layers"], json::array({0, 1, 3, 5, 6}));
  EXPECT_EQ(a["attention_groups"][0]["layers_owning_kv"], 3);
  EXPECT_EQ(a["attention_groups"][1]["layers"], json::array({2, 4, 7}));
  const json totals = json::parse(r.out)["totals"];
  EXPECT_EQ(totals["by_class"][1]["class"], "per-layer embedding");
  EXPECT_EQ(totals["by_class"][1]["bytes"], 128 * 512 / 32 * 34);

  Ran text = inspect(path);
  ASSERT_EQ(text.rc, 0) << text.err;
  const std::string t = squash(text.out);
  for (const char* expected : {
           "Architecture: gemma4 (\"tiny-e\") — 8 layers",
           "per-layer embedding width 16",
           "sliding 4 2 32 8 3 768 0-1, 3, 5-6\n",
           "full 4 2 64 - 2 1024 2, 4, 7\n",
           "sliding pattern: SSFSFSSF, window 8",
           "shared-KV layers: layers 5-6 read layer 3's cache; layer 7 reads layer 4's cache",
           "KV cache per token (F16): 1792 B — 1024 B in full-attention layers, 768 B in sliding",
       }) {
    EXPECT_NE(t.find(expected), std::string::npos) << "missing: " << expected << "\n" << text.out;
  }
}

// Gemma 4 E2B's real geometry (spec §1.1) as metadata only: the KV bytes per token must be the
// spec §4.3 figures (6144 B full-owned, 12 sliding layers × 1024 B, shared layers free).
TEST(InspectCli, Gemma4E2BKvBytesMatchSpec) {
  gguf::Writer w;
  w.set("general.architecture", gguf::MetaValue::string("gemma4"));
  w.set("gemma4.block_count", gguf::MetaValue::u32(35));
  w.set("gemma4.embedding_length", gguf::MetaValue::u32(1536));
  std::vector<uint32_t> n_ff(35, 6144);
  std::fill(n_ff.begin() + 15, n_ff.end(), 12288);
  w.set("gemma4.feed_forward_length", gguf::MetaValue::array_u32(n_ff));
  w.set("gemma4.attention.head_count", gguf::MetaValue::u32(8));
  w.set("gemma4.attention.head_count_kv", gguf::MetaValue::u32(1));
  w.set("gemma4.attention.key_length", gguf::MetaValue::u32(512));
  w.set("gemma4.attention.key_length_swa", gguf::MetaValue::u32(256));
  w.set("gemma4.attention.sliding_window", gguf::MetaValue::u32(512));
  std::vector<bool> sliding(35);
  for (int il = 0; il < 35; ++il) sliding[il] = il % 5 != 4;
  w.set("gemma4.attention.sliding_window_pattern", gguf::MetaValue::array_bool(sliding));
  w.set("gemma4.attention.shared_kv_layers", gguf::MetaValue::u32(20));
  w.set("gemma4.rope.dimension_count", gguf::MetaValue::u32(512));
  w.set("gemma4.rope.dimension_count_swa", gguf::MetaValue::u32(256));
  w.set("tokenizer.ggml.tokens",
        gguf::MetaValue::array_strings(std::vector<std::string>(262144, "t")));
  const std::string path = (testing_util::temp_dir() / "e2b-meta.gguf").string();
  ASSERT_TRUE(w.write(path).ok());
  Ran r = inspect(path + " --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const json a = json::parse(r.out)["architecture"];
  ASSERT_FALSE(a.contains("error")) << a["error"];
  EXPECT_EQ(a["kv_bytes_per_token"]["full_layers"], 6144);
  EXPECT_EQ(a["kv_bytes_per_token"]["sliding_layers"], 12288);
  EXPECT_EQ(a["vocab_size"], 262144);
  EXPECT_EQ(a["shared_kv_layers"].size(), 20u);
  EXPECT_EQ(a["per_layer"][15]["kv_source"], 13);
  EXPECT_EQ(a["per_layer"][19]["kv_source"], 14);
  EXPECT_EQ(a["per_layer"][34]["kv_source"], 14);
  EXPECT_EQ(a["per_layer"][20]["ffn_length"], 12288);
  ASSERT_EQ(a["attention_groups"].size(), 2u);
  EXPECT_EQ(a["attention_groups"][0]["layers_owning_kv"], 12);
  EXPECT_EQ(a["attention_groups"][1]["layers_owning_kv"], 3);
}

TEST(InspectCli, MalformedFileGivesOneLineErrorAndExit2) {
  const auto path = testing_util::source_dir() / "tests/data/gguf-malformed/tensor-overlap.gguf";
  for (const char* flags : {"", " --json"}) {
    Ran r = inspect(path.string() + flags);
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.out, "") << "stdout must stay empty for a bad file";
    EXPECT_EQ(r.err.rfind("gguf: " + path.string() + ": offset ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("data overlaps tensor 'token_embd.weight'"), std::string::npos) << r.err;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  }
  Ran missing = inspect("/nonexistent/model.gguf");
  EXPECT_EQ(missing.rc, 2);
  EXPECT_EQ(missing.out, "");
  EXPECT_NE(missing.err.find("cannot open /nonexistent/model.gguf"), std::string::npos);
}

// Strings from a file reach the terminal escaped and the JSON as valid UTF-8.
TEST(InspectCli, HostileStringsAreEscaped) {
  gguf::Writer w;
  w.set("general.name", gguf::MetaValue::string("bad\xff utf8 \x1b[2J and\nnewline"));
  w.set("tokenizer.ggml.tokens", gguf::MetaValue::array_strings({"\xc3", "ok", "\x7f"}));
  const std::string path = (testing_util::temp_dir() / "hostile.gguf").string();
  ASSERT_TRUE(w.write(path).ok());
  Ran text = inspect(path);
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos);
  EXPECT_NE(text.out.find("\"bad\\xff utf8 \\x1b[2J and\\nnewline\""), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("[\"\\xc3\", \"ok\", \"\\x7f\"]"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Architecture: none"), std::string::npos) << text.out;
  Ran j = inspect(path + " --json");
  ASSERT_EQ(j.rc, 0) << j.err;
  const json doc = json::parse(j.out);  // throws on invalid UTF-8
  EXPECT_EQ(doc["metadata"]["general.name"]["value"], "bad\xef\xbf\xbd utf8 \x1b[2J and\nnewline");
  EXPECT_TRUE(doc["architecture"].is_null());
}

}  // namespace
