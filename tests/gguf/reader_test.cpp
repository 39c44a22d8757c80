// GGUF reader on real files: the shipped model, every vocabulary and known-answer file.
#include <gtest/gtest.h>

#include "gguf/file.h"
#include "testing/testing.h"

namespace {

TEST(GgufReader, ReadsStories260K) {
  auto file = gguf::File::open((testing_util::shared_dir() / "models/stories260K.gguf").string());
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->metadata().size(), 19u);
  EXPECT_EQ(file->tensors().size(), 48u);
  EXPECT_EQ(file->data_offset(), 14176u);
  EXPECT_EQ(*file->find("general.architecture")->as_string(), "llama");
  EXPECT_EQ(*file->find("llama.embedding_length")->as_u64(), 64u);
  EXPECT_NEAR(*file->find("llama.attention.layer_norm_rms_epsilon")->as_f64(), 1e-5, 1e-9);
  const gguf::Value* tokens = file->find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->array_size(), 512u);
  EXPECT_EQ(tokens->array_string(0), "<unk>");
  EXPECT_EQ(tokens->array_string(1), "<s>");
  auto types = tokens->array_as<int32_t>();
  EXPECT_FALSE(types.has_value());  // strings are not numbers
  auto token_type = file->find("tokenizer.ggml.token_type")->array_as<int32_t>();
  ASSERT_TRUE(token_type.has_value());
  EXPECT_EQ((*token_type)[0], 2);
  EXPECT_EQ((*token_type)[3], 6);

  const gguf::TensorInfo* embd = file->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, gguf::TensorType::kF32);
  EXPECT_EQ(embd->ne[0], 64u);
  EXPECT_EQ(embd->ne[1], 512u);
  EXPECT_EQ(embd->n_bytes, 64u * 512 * 4);
  EXPECT_EQ(embd->data.data(), file->bytes().data() + file->data_offset() + embd->offset);
}

TEST(GgufReader, ReadsEveryQuantKnownAnswerFile) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing_util::shared_dir() / "testdata/quant")) {
    if (entry.path().extension() != ".gguf") continue;
    auto file = gguf::File::open(entry.path().string());
    ASSERT_TRUE(file.ok()) << file.error().message();
    ++seen;
  }
  EXPECT_EQ(seen, 27);  // 26 types + imatrix.gguf
}

TEST(GgufReader, ReadsEveryVocabulary) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing_util::shared_dir() / "models/vocab")) {
    if (entry.path().extension() != ".gguf") continue;
    auto file = gguf::File::open(entry.path().string());
    ASSERT_TRUE(file.ok()) << file.error().message();
    EXPECT_TRUE(file->find("tokenizer.ggml.model") != nullptr) << entry.path();
    ++seen;
  }
  EXPECT_EQ(seen, 13);
}

}  // namespace
