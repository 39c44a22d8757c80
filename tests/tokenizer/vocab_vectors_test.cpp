// Every published test vector of every vocabulary in ../shared/models/vocab, and round trips.
#include <gtest/gtest.h>

#include <sstream>

#include "gguf/file.h"
#include "testing/testing.h"
#include "tokenizer/encoders.h"
#include "tokenizer/tokenizer.h"

namespace {

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};

// The .inp holds the cases separated by "\n__ggml_vocab_test__\n" (a separator after the last
// case is a terminator, not an empty case); line i of the .out holds case i's ids.
std::vector<VectorCase> read_vectors(const std::filesystem::path& inp) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string text = testing_util::read_text(inp);
  std::vector<std::string> cases;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(sep, pos)) != std::string::npos; pos = hit + sep.size()) {
    cases.push_back(text.substr(pos, hit - pos));
  }
  if (pos < text.size()) cases.push_back(text.substr(pos));
  std::filesystem::path out = inp;
  out.replace_extension(".out");
  std::istringstream lines(testing_util::read_text(out));
  std::vector<VectorCase> result;
  std::string line;
  for (const std::string& c : cases) {
    if (!std::getline(lines, line)) {
      ADD_FAILURE() << out << " has fewer lines than " << inp << " has cases";
      break;
    }
    std::istringstream ids(line);
    VectorCase v{c, {}};
    for (int32_t id; ids >> id;) v.ids.push_back(id);
    result.push_back(std::move(v));
  }
  return result;
}

std::string ids_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

struct VocabCase {
  const char* vocab;    // file under models/vocab
  const char* vectors;  // its .inp/.out (gemma-4's vectors run on the reconstructed gemma vocab)
  size_t n_cases;
};

class VocabVectors : public ::testing::TestWithParam<VocabCase> {};

TEST_P(VocabVectors, EncodeMatchesPublishedIds) {
  const VocabCase& p = GetParam();
  auto dir = testing_util::shared_dir() / "models/vocab";
  auto file = gguf::File::open((dir / p.vocab).string());
  ASSERT_TRUE(file.ok()) << file.error().message();
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.error().message();
  auto cases = read_vectors(dir / (std::string(p.vectors) + ".inp"));
  ASSERT_EQ(cases.size(), p.n_cases);
  size_t passed = 0;
  for (const VectorCase& c : cases) {
    auto ids = tok->encode(c.text, {.add_bos = false, .parse_special = false});
    if (ids == c.ids) {
      ++passed;
    } else {
      ADD_FAILURE() << p.vocab << " case \"" << c.text << "\"\n  expected " << ids_string(c.ids)
                    << "\n  actual   " << ids_string(ids);
    }
  }
  EXPECT_EQ(passed, cases.size());
  std::printf("[ vectors  ] %s: %zu/%zu\n", p.vocab, passed, cases.size());
}

// Decoding the published ids gives back the input text. Every tokenizer here is lossless except
// WordPiece: BERT's normalizer lowercases, strips accents, drops control characters and
// whitespace, and isolates punctuation, so for bert the decoded text is compared with the
// normalized words joined by one space (a word that has no pieces decodes as U+FFFD, the
// unknown token). SentencePiece's dummy prefix space is not in the input and decode drops it.
TEST_P(VocabVectors, DecodeRoundTrips) {
  const VocabCase& p = GetParam();
  auto dir = testing_util::shared_dir() / "models/vocab";
  auto file = gguf::File::open((dir / p.vocab).string());
  ASSERT_TRUE(file.ok()) << file.error().message();
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.error().message();
  const bool wordpiece = tok->kind() == tokenizer::ModelKind::kWpm;
  for (const VectorCase& c : read_vectors(dir / (std::string(p.vectors) + ".inp"))) {
    std::string expected = c.text;
    if (wordpiece) {
      expected.clear();
      for (const std::string& word : tokenizer::bert_words(c.text)) {
        if (!expected.empty()) expected += ' ';
        auto ids = tok->encode(word, {.add_bos = false});
        expected += ids.size() == 1 && tok->token_text(ids[0]) == "[UNK]" ? "\xEF\xBF\xBD" : word;
      }
    }
    EXPECT_EQ(tok->decode(c.ids), expected) << p.vocab;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllVocabularies, VocabVectors,
    ::testing::Values(
        VocabCase{"ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-spm.gguf", 46},
        VocabCase{"ggml-vocab-phi-3.gguf", "ggml-vocab-phi-3.gguf", 46},
        VocabCase{"ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-2.gguf", 46},
        VocabCase{"ggml-vocab-mpt.gguf", "ggml-vocab-mpt.gguf", 46},
        VocabCase{"ggml-vocab-falcon.gguf", "ggml-vocab-falcon.gguf", 46},
        VocabCase{"ggml-vocab-starcoder.gguf", "ggml-vocab-starcoder.gguf", 46},
        VocabCase{"ggml-vocab-refact.gguf", "ggml-vocab-refact.gguf", 46},
        VocabCase{"ggml-vocab-deepseek-coder.gguf", "ggml-vocab-deepseek-coder.gguf", 46},
        VocabCase{"ggml-vocab-deepseek-llm.gguf", "ggml-vocab-deepseek-llm.gguf", 46},
        VocabCase{"ggml-vocab-bert-bge.gguf", "ggml-vocab-bert-bge.gguf", 46},
        VocabCase{"ggml-vocab-gemma-3-reconstructed.gguf", "ggml-vocab-gemma-4.gguf", 46}),
    [](const auto& param_info) {
      std::string name = param_info.param.vocab;
      name = name.substr(11, name.size() - 16);  // strip "ggml-vocab-" and ".gguf"
      for (char& ch : name) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

}  // namespace
