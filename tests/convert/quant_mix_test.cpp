// The quantization mixes against llama.cpp's own output: per-tensor types and type counts that
// llama.cpp printed when loading files it had quantized (logs quoted in public issue threads),
// rebuilt from the models' tensor tables.
#include "convert/quant_mix.h"

#include <gtest/gtest.h>

#include <map>

namespace {

using convert::DType;
using convert::TensorDesc;

// The tensor table of a llama-architecture model as llama.cpp's converter writes it.
struct LlamaShape {
  int n_layer, n_embd, n_ff, n_head, n_head_kv, n_vocab;
  bool tied;  // no output.weight (the token embedding doubles as the output projection)
  bool rope_freqs = false;
};

std::vector<TensorDesc> llama_tensors(const LlamaShape& s) {
  const int64_t kv = static_cast<int64_t>(s.n_embd) / s.n_head * s.n_head_kv;
  std::vector<TensorDesc> t;
  t.push_back({"token_embd.weight", DType::kF16, {s.n_embd, s.n_vocab}});
  t.push_back({"output_norm.weight", DType::kF32, {s.n_embd}});
  if (!s.tied) t.push_back({"output.weight", DType::kF16, {s.n_embd, s.n_vocab}});
  if (s.rope_freqs) t.push_back({"rope_freqs.weight", DType::kF32, {64}});
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    t.push_back({b + "attn_norm.weight", DType::kF32, {s.n_embd}});
    t.push_back({b + "attn_q.weight", DType::kF16, {s.n_embd, s.n_embd}});
    t.push_back({b + "attn_k.weight", DType::kF16, {s.n_embd, kv}});
    t.push_back({b + "attn_v.weight", DType::kF16, {s.n_embd, kv}});
    t.push_back({b + "attn_output.weight", DType::kF16, {s.n_embd, s.n_embd}});
    t.push_back({b + "ffn_norm.weight", DType::kF32, {s.n_embd}});
    t.push_back({b + "ffn_gate.weight", DType::kF16, {s.n_embd, s.n_ff}});
    t.push_back({b + "ffn_up.weight", DType::kF16, {s.n_embd, s.n_ff}});
    t.push_back({b + "ffn_down.weight", DType::kF16, {s.n_ff, s.n_embd}});
  }
  return t;
}

convert::ModelFacts llama_facts(const LlamaShape& s) {
  return {"llama", s.n_layer, s.n_head, s.n_head_kv, 0};
}

convert::MixOptions mix(std::string_view name) {
  convert::MixOptions o;
  o.file_type = *convert::parse_file_type(name);
  return o;
}

std::map<std::string, DType> choose(const LlamaShape& s, const convert::MixOptions& options) {
  const auto tensors = llama_tensors(s);
  auto choices = convert::choose_types(llama_facts(s), tensors, options);
  EXPECT_TRUE(choices.ok()) << choices.error().message();
  std::map<std::string, DType> out;
  for (size_t i = 0; i < tensors.size(); ++i) out[tensors[i].name] = (*choices)[i].type;
  return out;
}

std::map<DType, int> count_types(const std::map<std::string, DType>& types) {
  std::map<DType, int> out;
  for (const auto& [name, type] : types) ++out[type];
  return out;
}

// Llama 3.2 3B Q4_K_M as llama.cpp loads it: "type f32: 58 tensors, type q4_K: 168 tensors,
// type q6_K: 29 tensors" (rjmalagon/ollama-linux-amd-apu#19). 28 layers, tied embeddings (so
// token_embd gets the output's Q6_K), attn_v and ffn_down Q6_K in 14 layers each.
TEST(QuantMix, Llama32_3bQ4KMMatchesLlamaCppTypeCounts) {
  const LlamaShape shape{28, 3072, 8192, 24, 8, 128256, true, true};
  const auto counts = count_types(choose(shape, mix("Q4_K_M")));
  EXPECT_EQ(counts.at(DType::kF32), 58);
  EXPECT_EQ(counts.at(DType::kQ4_K), 168);
  EXPECT_EQ(counts.at(DType::kQ6_K), 29);
  EXPECT_EQ(counts.size(), 3u);
}

// Mistral 7B Q5_K_M (32 layers, GQA 4, untied): from TheBloke's file as llama.cpp listed it
// (SciSharp/LLamaSharp#35, h2oai/h2ogpt#1072).
TEST(QuantMix, Mistral7bQ5KMMatchesLlamaCppListing) {
  const LlamaShape shape{32, 4096, 14336, 32, 8, 32000, false};
  const auto types = choose(shape, mix("Q5_K_M"));
  EXPECT_EQ(types.at("blk.29.attn_output.weight"), DType::kQ5_K);
  EXPECT_EQ(types.at("blk.29.attn_q.weight"), DType::kQ5_K);
  EXPECT_EQ(types.at("blk.29.attn_k.weight"), DType::kQ5_K);
  EXPECT_EQ(types.at("blk.29.attn_v.weight"), DType::kQ6_K);
  EXPECT_EQ(types.at("blk.29.ffn_down.weight"), DType::kQ6_K);
  EXPECT_EQ(types.at("blk.30.ffn_gate.weight"), DType::kQ5_K);
  EXPECT_EQ(types.at("blk.30.ffn_up.weight"), DType::kQ5_K);
  EXPECT_EQ(types.at("blk.30.attn_v.weight"), DType::kQ6_K);
  EXPECT_EQ(types.at("blk.30.ffn_down.weight"), DType::kQ6_K);
  EXPECT_EQ(types.at("output.weight"), DType::kQ6_K);
  EXPECT_EQ(types.at("blk.30.attn_norm.weight"), DType::kF32);
  // The rule itself: layers < 4, >= 28, and every third from 6 get Q6_K.
  for (int il = 0; il < 32; ++il) {
    const bool more = il < 4 || il >= 28 || (il - 4) % 3 == 2;
    EXPECT_EQ(types.at("blk." + std::to_string(il) + ".attn_v.weight"),
              more ? DType::kQ6_K : DType::kQ5_K)
        << il;
  }
}

// Llama 3 8B Q4_K_M (mozilla-ai/llamafile#122): blk.29 attn_v and ffn_down Q6_K, the rest Q4_K.
TEST(QuantMix, Llama3_8bQ4KMMatchesLlamaCppListing) {
  const LlamaShape shape{32, 4096, 14336, 32, 8, 128256, false, true};
  const auto types = choose(shape, mix("Q4_K_M"));
  EXPECT_EQ(types.at("blk.29.attn_q.weight"), DType::kQ4_K);
  EXPECT_EQ(types.at("blk.29.attn_k.weight"), DType::kQ4_K);
  EXPECT_EQ(types.at("blk.29.attn_v.weight"), DType::kQ6_K);
  EXPECT_EQ(types.at("blk.29.attn_output.weight"), DType::kQ4_K);
  EXPECT_EQ(types.at("blk.29.ffn_gate.weight"), DType::kQ4_K);
  EXPECT_EQ(types.at("blk.29.ffn_down.weight"), DType::kQ6_K);
  EXPECT_EQ(types.at("blk.30.attn_v.weight"), DType::kQ6_K);
  EXPECT_EQ(count_types(types).at(DType::kQ6_K), 33);  // output + 16 attn_v + 16 ffn_down
}

// stories110M Q4_0 (ggml-org/llama.cpp#2685): the output is Q6_K, everything else Q4_0.
TEST(QuantMix, Q4_0KeepsOutputAtQ6K) {
  const LlamaShape shape{12, 768, 2048, 12, 12, 32000, false};
  const auto types = choose(shape, mix("Q4_0"));
  EXPECT_EQ(types.at("token_embd.weight"), DType::kQ4_0);
  EXPECT_EQ(types.at("output.weight"), DType::kQ6_K);
  EXPECT_EQ(types.at("blk.0.attn_q.weight"), DType::kQ4_0);
  EXPECT_EQ(types.at("blk.0.attn_v.weight"), DType::kQ4_0);
}

// Rows that are not whole super-blocks fall back as llama.cpp's quantize does: stories260K has
// 64-wide rows (not 256) and a 172-wide ffn_down (not even 32).
TEST(QuantMix, FallsBackWhenRowsAreNotWholeBlocks) {
  const LlamaShape shape{5, 64, 172, 8, 4, 512, false};
  const auto tensors = llama_tensors(shape);
  auto choices = convert::choose_types(llama_facts(shape), tensors, mix("Q4_K_M"));
  ASSERT_TRUE(choices.ok());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& c = (*choices)[i];
    const std::string& name = tensors[i].name;
    if (name == "output.weight") {
      EXPECT_EQ(c.type, DType::kQ8_0);  // the output rule's own fallback
    } else if (name.find("ffn_down") != std::string::npos) {
      EXPECT_EQ(c.type, DType::kF16) << name;
      EXPECT_TRUE(c.fallback);
    } else if (name == "blk.2.attn_v.weight" || name == "blk.4.attn_v.weight") {
      EXPECT_EQ(c.wanted, DType::kQ6_K) << name;  // use_more_bits of 5 layers: 2 and 4
      EXPECT_EQ(c.type, DType::kQ8_0) << name;
    } else if (name.find("attn_q") != std::string::npos) {
      EXPECT_EQ(c.type, DType::kQ5_0) << name;
    }
  }
}

TEST(QuantMix, OverridesKeepAndPure) {
  const LlamaShape shape{8, 256, 512, 4, 4, 1000, true};
  auto options = mix("Q4_K_M");
  options.overrides.push_back(*convert::parse_tensor_type_override("attn_(q|k)=q8_0"));
  options.overrides.push_back(*convert::parse_tensor_type_override("blk\\.0\\.=f16"));
  ASSERT_TRUE(convert::parse_keep("output", &options.keep).ok());
  const auto types = choose(shape, options);
  EXPECT_EQ(types.at("blk.0.attn_q.weight"), DType::kQ8_0);  // first match wins
  EXPECT_EQ(types.at("blk.0.ffn_up.weight"), DType::kF16);
  EXPECT_EQ(types.at("blk.3.attn_k.weight"), DType::kQ8_0);
  EXPECT_EQ(types.at("blk.3.ffn_up.weight"), DType::kQ4_K);
  EXPECT_EQ(types.at("token_embd.weight"), DType::kF16);  // tied: --keep output keeps it
  auto pure = mix("Q4_K_M");
  pure.pure = true;
  const auto counts = count_types(choose(shape, pure));
  EXPECT_EQ(counts.at(DType::kQ4_K), 8 * 7 + 1);
}

TEST(QuantMix, BadOptionsSayWhatToDo) {
  EXPECT_FALSE(convert::parse_file_type("Q4_K_X").ok());
  EXPECT_NE(convert::parse_file_type("q9").error().message().find("Q4_K_M"), std::string::npos);
  EXPECT_EQ(convert::parse_file_type("q4_k")->name, "Q4_K_M");
  EXPECT_FALSE(convert::parse_tensor_type_override("attn_v").ok());
  EXPECT_FALSE(convert::parse_tensor_type_override("attn_v=q9_9").ok());
  EXPECT_FALSE(convert::parse_tensor_type_override("(=q8_0").ok());
  convert::KeepTensors keep;
  EXPECT_FALSE(convert::parse_keep("outputs", &keep).ok());
  ASSERT_TRUE(convert::parse_keep("embeddings", &keep).ok());
  EXPECT_TRUE(keep.output && keep.token_embd && keep.per_layer_token_embd);
  // Q2_K_S without an importance matrix is refused, naming the tensor.
  const LlamaShape shape{8, 256, 512, 4, 4, 1000, false};
  auto r = convert::choose_types(llama_facts(shape), llama_tensors(shape), mix("Q2_K_S"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("--imatrix"), std::string::npos) << r.error().message();
}

}  // namespace
