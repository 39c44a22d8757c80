// Tokenizers converted from Hugging Face files against llama.cpp's: the Llama 2 SentencePiece
// model against llama.cpp's own ggml-vocab-llama-spm.gguf, the real Gemma 3 tokenizer.json
// against the Gemma-4-style vocabulary built from it; both must tokenize the published test
// vectors exactly.
#include "convert/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gguf/file.h"
#include "testing/testing.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

fs::path vocab_dir() {
  return testing_util::shared_dir() / "models/vocab";
}

// Converts the tokenizer in `dir` and writes a vocab-only GGUF beside it.
gguf::File convert_vocab(const fs::path& dir, convert::VocabStyle style, int64_t n_vocab) {
  gguf::Writer w;
  w.set("general.architecture",
        gguf::MetaValue::string(style == convert::VocabStyle::kGemma4 ? "gemma4" : "llama"));
  auto info = convert::add_hf_tokenizer(w, dir.string(), style, n_vocab);
  EXPECT_TRUE(info.ok()) << info.error().message();
  const fs::path out = dir / "vocab.gguf";
  EXPECT_TRUE(w.write(out.string()).ok());
  auto file = gguf::File::open(out.string());
  EXPECT_TRUE(file.ok());
  return std::move(file).value();
}

// The published vectors (.inp cases separated by "\n__ggml_vocab_test__\n", .out ids per line).
size_t check_vectors(const gguf::File& file, const fs::path& inp) {
  auto tok = tokenizer::Tokenizer::from_gguf(file);
  EXPECT_TRUE(tok.ok()) << tok.error().message();
  if (!tok.ok()) return 0;
  const std::string sep = "\n__ggml_vocab_test__\n";
  const std::string text = testing_util::read_text(inp);
  fs::path out = inp;
  out.replace_extension(".out");
  std::istringstream lines(testing_util::read_text(out));
  // A separator after the last case ends it; without one, the rest is the last case.
  std::vector<std::string> inputs;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(sep, pos)) != std::string::npos; pos = hit + sep.size()) {
    inputs.push_back(text.substr(pos, hit - pos));
  }
  if (pos < text.size()) inputs.push_back(text.substr(pos));
  for (const std::string& input : inputs) {
    std::string line;
    std::getline(lines, line);
    std::istringstream ids(line);
    std::vector<int32_t> expected;
    for (int32_t id; ids >> id;) expected.push_back(id);
    EXPECT_EQ(tok->encode(input, {.add_bos = false, .parse_special = false}), expected)
        << "\"" << input << "\"";
  }
  return inputs.size();
}

std::vector<std::string> strings(const gguf::File& f, const char* key) {
  const gguf::Value* v = f.find(key);
  EXPECT_NE(v, nullptr) << key;
  if (!v) return {};
  return {v->array_strings().begin(), v->array_strings().end()};
}

template <class T>
std::vector<T> numbers(const gguf::File& f, const char* key) {
  const gguf::Value* v = f.find(key);
  EXPECT_NE(v, nullptr) << key;
  return v ? v->array_as<T>().value_or(std::vector<T>{}) : std::vector<T>{};
}

TEST(HfTokenizer, SentencePieceMatchesLlamaCppConversion) {
  const fs::path dir = testing_util::temp_dir();
  fs::copy_file(testing_util::shared_dir() / "models/llama2c/tokenizer.model",
                dir / "tokenizer.model");
  std::ofstream(dir / "config.json")
      << R"({"vocab_size": 32000, "bos_token_id": 1, "eos_token_id": 2})";
  const gguf::File ours = convert_vocab(dir, convert::VocabStyle::kLlama, 32000);
  auto theirs = gguf::File::open((vocab_dir() / "ggml-vocab-llama-spm.gguf").string());
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(*ours.get_string("tokenizer.ggml.model").value(), "llama");
  EXPECT_EQ(strings(ours, "tokenizer.ggml.tokens"), strings(*theirs, "tokenizer.ggml.tokens"));
  EXPECT_EQ(numbers<float>(ours, "tokenizer.ggml.scores"),
            numbers<float>(*theirs, "tokenizer.ggml.scores"));
  EXPECT_EQ(numbers<int32_t>(ours, "tokenizer.ggml.token_type"),
            numbers<int32_t>(*theirs, "tokenizer.ggml.token_type"));
  EXPECT_EQ(*ours.get_u64("tokenizer.ggml.bos_token_id").value(), 1u);
  EXPECT_EQ(*ours.get_u64("tokenizer.ggml.eos_token_id").value(), 2u);
  EXPECT_GT(check_vectors(ours, vocab_dir() / "ggml-vocab-llama-spm.gguf.inp"), 30u);
}

TEST(HfTokenizer, Gemma3TokenizerJsonAsGemma4Vocabulary) {
  const fs::path dir = testing_util::temp_dir();
  const fs::path src = testing_util::shared_dir() / "models/tokenizers";
  for (const char* name : {"gemma3-tokenizer.json", "gemma3-tokenizer_config.json"}) {
    std::string out, err;
    const std::string target = std::string(name).substr(7);  // drop "gemma3-"
    ASSERT_EQ(testing_util::run_command(
                  fmt::format("xz -dc {}/{}.xz > {}/{}", src.string(), name, dir.string(), target),
                  &out, &err),
              0)
        << err;
  }
  const gguf::File ours = convert_vocab(dir, convert::VocabStyle::kGemma4, 0);
  auto theirs = gguf::File::open((vocab_dir() / "ggml-vocab-gemma-3-reconstructed.gguf").string());
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(*ours.get_string("tokenizer.ggml.model").value(), "gemma4");
  EXPECT_EQ(strings(ours, "tokenizer.ggml.tokens"), strings(*theirs, "tokenizer.ggml.tokens"));
  EXPECT_EQ(strings(ours, "tokenizer.ggml.merges"), strings(*theirs, "tokenizer.ggml.merges"));
  EXPECT_EQ(numbers<float>(ours, "tokenizer.ggml.scores"),
            numbers<float>(*theirs, "tokenizer.ggml.scores"));
  // Types: byte and control tokens agree; the reconstruction marks the other added tokens
  // (<unusedN>, <mask>) user-defined where llama.cpp's converter leaves them normal.
  const auto ours_types = numbers<int32_t>(ours, "tokenizer.ggml.token_type");
  const auto their_types = numbers<int32_t>(*theirs, "tokenizer.ggml.token_type");
  ASSERT_EQ(ours_types.size(), their_types.size());
  for (size_t i = 0; i < ours_types.size(); ++i) {
    if (their_types[i] == 3 || their_types[i] == 6 || ours_types[i] == 3 || ours_types[i] == 6) {
      EXPECT_EQ(ours_types[i], their_types[i]) << "token " << i;
    }
  }
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"}) {
    EXPECT_EQ(*ours.get_u64(key).value(), *theirs->get_u64(key).value()) << key;
  }
  EXPECT_EQ(check_vectors(ours, vocab_dir() / "ggml-vocab-gemma-4.gguf.inp"), 46u);
}

TEST(HfTokenizer, MissingOrBadTokenizerIsOneLine) {
  const fs::path dir = testing_util::temp_dir();
  gguf::Writer w;
  auto none = convert::add_hf_tokenizer(w, dir.string(), convert::VocabStyle::kGemma4, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("tokenizer.json"), std::string::npos);
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "WordPiece", "vocab": {}}})";
  auto wordpiece = convert::add_hf_tokenizer(w, dir.string(), convert::VocabStyle::kLlama, 0);
  ASSERT_FALSE(wordpiece.ok());
  EXPECT_NE(wordpiece.error().message().find("WordPiece"), std::string::npos);
  std::ofstream(dir / "tokenizer.model") << "not a protobuf \xff\xff\xff\xff";
  auto garbage = convert::add_hf_tokenizer(w, dir.string(), convert::VocabStyle::kLlama, 0);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error().message().find("tokenizer.model"), std::string::npos)
      << garbage.error().message();
}

}  // namespace
