// model::Spec read from real files: the shipped stories260K (llama) and its published facts.
#include "model/spec.h"

#include <gtest/gtest.h>

#include <cmath>

#include "testing/testing.h"

namespace {

TEST(Spec, Stories260KMatchesItsPublishedShape) {
  auto file = gguf::File::open((testing_util::shared_dir() / "models/stories260K.gguf").string());
  ASSERT_TRUE(file.ok()) << file.error().message();
  auto spec = model::spec_from_gguf(*file);
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->arch, model::Arch::kLlama);
  EXPECT_EQ(spec->n_layer, 5);
  EXPECT_EQ(spec->n_embd, 64);
  EXPECT_EQ(spec->n_vocab, 512);
  EXPECT_EQ(spec->n_ctx_train, 2048);
  EXPECT_FLOAT_EQ(spec->rms_eps, 1e-5f);
  EXPECT_FALSE(spec->tied_output);  // the file carries output.weight (a copy of token_embd)
  EXPECT_FLOAT_EQ(spec->attention_scale, 1.0f / std::sqrt(8.0f));
  ASSERT_EQ(spec->layers.size(), 5u);
  for (const auto& l : spec->layers) {
    EXPECT_EQ(l.n_head, 8);
    EXPECT_EQ(l.n_head_kv, 4);
    EXPECT_EQ(l.head_dim, 8);
    EXPECT_EQ(l.n_ff, 172);
    EXPECT_TRUE(l.owns_kv());
    EXPECT_FALSE(l.is_sliding());
    EXPECT_EQ(l.rope.style, model::RopeStyle::kAdjacent);
    ASSERT_EQ(l.rope.inv_freq.size(), 4u);
    // freq = 10000^(-2i/8) with the default base (the file has no rope.freq_base).
    EXPECT_FLOAT_EQ(l.rope.inv_freq[1], static_cast<float>(std::pow(10000.0, -2.0 / 8)));
  }
}

TEST(Spec, VocabularyOnlyFileIsRefusedClearly) {
  auto file = gguf::File::open(
      (testing_util::shared_dir() / "models/vocab/ggml-vocab-gpt-2.gguf").string());
  ASSERT_TRUE(file.ok());
  auto spec = model::spec_from_gguf(*file);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.error().message().find("unsupported architecture 'gpt2'"), std::string::npos)
      << spec.error().message();
  EXPECT_NE(spec.error().message().find("llama, gemma4"), std::string::npos);
}

TEST(TensorClass, ClassifiesGgufNames) {
  using model::TensorClass;
  EXPECT_EQ(model::classify_tensor("token_embd.weight").cls, TensorClass::kTokenEmbedding);
  EXPECT_EQ(model::classify_tensor("per_layer_token_embd.weight").cls,
            TensorClass::kPerLayerEmbedding);
  EXPECT_EQ(model::classify_tensor("per_layer_model_proj.weight").cls,
            TensorClass::kPerLayerEmbedding);
  EXPECT_EQ(model::classify_tensor("per_layer_proj_norm.weight").cls, TensorClass::kNorm);
  EXPECT_EQ(model::classify_tensor("output_norm.weight").cls, TensorClass::kNorm);
  EXPECT_EQ(model::classify_tensor("output.weight").cls, TensorClass::kOutput);
  EXPECT_EQ(model::classify_tensor("rope_freqs.weight").cls, TensorClass::kOther);
  auto q = model::classify_tensor("blk.17.attn_q.weight");
  EXPECT_EQ(q.cls, TensorClass::kAttention);
  EXPECT_EQ(q.layer, 17);
  EXPECT_EQ(model::classify_tensor("blk.3.attn_q_norm.weight").cls, TensorClass::kNorm);
  EXPECT_EQ(model::classify_tensor("blk.3.ffn_down.weight").cls, TensorClass::kFeedForward);
  EXPECT_EQ(model::classify_tensor("blk.3.ffn_gate_up_exps.weight").cls, TensorClass::kExperts);
  EXPECT_EQ(model::classify_tensor("blk.3.ffn_gate_inp.weight").cls, TensorClass::kExperts);
  EXPECT_EQ(model::classify_tensor("blk.3.ffn_down_exps.scale").cls, TensorClass::kExperts);
  EXPECT_EQ(model::classify_tensor("blk.3.layer_output_scale.weight").cls, TensorClass::kNorm);
  EXPECT_EQ(model::classify_tensor("blk.3.inp_gate.weight").cls, TensorClass::kPerLayerEmbedding);
  EXPECT_EQ(model::classify_tensor("blk.3.proj.weight").cls, TensorClass::kPerLayerEmbedding);
  EXPECT_EQ(model::classify_tensor("blk.3.post_norm.weight").cls, TensorClass::kNorm);
}

}  // namespace
