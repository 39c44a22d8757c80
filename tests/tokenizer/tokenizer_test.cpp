// Tokenizer behaviour beyond the published vectors: special tokens, BOS, end of generation,
// streaming, errors, robustness on arbitrary bytes, and the stories260K golden prompts.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "gguf/writer.h"
#include "testing/testing.h"
#include "tokenizer/unicode.h"

namespace {

using tokenizer::EncodeOptions;
using tokenizer::Tokenizer;

// Loads each vocabulary once per test binary (the Gemma one has 262K tokens and 515K merges).
const Tokenizer& load(const std::string& name) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  auto path = name == "stories260K.gguf" ? testing_util::shared_dir() / "models" / name
                                         : testing_util::shared_dir() / "models/vocab" / name;
  auto file = gguf::File::open(path.string());
  EXPECT_TRUE(file.ok()) << file.error().message();
  auto tok = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tok.ok()) << tok.error().message();
  return cache.emplace(name, std::move(*tok)).first->second;
}

const char* kGemma = "ggml-vocab-gemma-3-reconstructed.gguf";
const char* kLlama = "ggml-vocab-llama-spm.gguf";

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    auto c = tokenizer::decode_utf8(s, i);
    if (c.cp == tokenizer::kInvalidCodepoint) return false;
    i += c.len;
  }
  return true;
}

TEST(Tokenizer, Stories260KGoldenPromptIds) {
  const Tokenizer& tok = load("stories260K.gguf");
  auto golden = nlohmann::json::parse(
      testing_util::read_text(testing_util::shared_dir() / "models/stories260K.golden.json"));
  ASSERT_EQ(golden["cases"].size(), 2u);
  for (const auto& c : golden["cases"]) {
    const std::string prompt = c["prompt"];
    const std::vector<int32_t> expected = c["prompt_ids"];
    EXPECT_EQ(tok.encode(prompt), expected) << prompt;
    EXPECT_EQ(tok.decode(expected), prompt);  // BOS hidden, dummy prefix space dropped
  }
}

TEST(Tokenizer, Stories260KDefaultsWithoutKeys) {
  // The file has no add_bos_token / add_space_prefix keys: SentencePiece defaults apply.
  const Tokenizer& tok = load("stories260K.gguf");
  EXPECT_EQ(tok.model_name(), "llama");
  EXPECT_EQ(tok.n_vocab(), 512);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.end_of_generation(), std::vector<int32_t>({2}));
  EXPECT_TRUE(tok.is_end_of_generation(2));
  EXPECT_FALSE(tok.is_end_of_generation(1));
  EXPECT_EQ(tok.encode("Once", {.add_bos = false}), std::vector<int32_t>({403}));
}

TEST(Tokenizer, GemmaEndOfGenerationByText) {
  // eos_token_id is 106 (<end_of_turn>) in this file; <eos> (1) is recognised by its text.
  const Tokenizer& tok = load(kGemma);
  EXPECT_EQ(tok.eos(), 106);
  EXPECT_EQ(tok.end_of_generation(), std::vector<int32_t>({1, 106}));
  EXPECT_FALSE(tok.is_end_of_generation(2));
  EXPECT_FALSE(tok.is_end_of_generation(105));
}

TEST(Tokenizer, EndOfGenerationOfOtherFamilies) {
  EXPECT_EQ(load("ggml-vocab-phi-3.gguf").end_of_generation(),
            std::vector<int32_t>({32000, 32007}));  // <|endoftext|> (EOS), <|end|>
  EXPECT_EQ(load("ggml-vocab-gpt-2.gguf").end_of_generation(), std::vector<int32_t>({50256}));
}

TEST(Tokenizer, ControlTokensParsedOnlyWhenAsked) {
  const Tokenizer& tok = load(kGemma);
  const std::string text = "<start_of_turn>user\nHi<end_of_turn>";
  auto plain = tok.encode(text, {.add_bos = false});
  EXPECT_FALSE(contains(plain, 105));
  EXPECT_FALSE(contains(plain, 106));
  EXPECT_EQ(tok.decode(plain), text);

  auto special = tok.encode(text, {.add_bos = false, .parse_special = true});
  ASSERT_GE(special.size(), 3u);
  EXPECT_EQ(special.front(), 105);
  EXPECT_EQ(special.back(), 106);
  EXPECT_EQ(tok.decode(special), "user\nHi");  // control tokens hidden
  EXPECT_EQ(tok.decode(special, /*render_special=*/true), text);
}

TEST(Tokenizer, SentencePieceControlTextStaysText) {
  const Tokenizer& tok = load(kLlama);
  auto plain = tok.encode("<s>Hello</s>", {.add_bos = false});
  EXPECT_FALSE(contains(plain, 1));
  EXPECT_FALSE(contains(plain, 2));
  EXPECT_EQ(tok.decode(plain), "<s>Hello</s>");
  auto special = tok.encode("<s>Hello</s>", {.add_bos = false, .parse_special = true});
  EXPECT_EQ(special.front(), 1);
  EXPECT_EQ(special.back(), 2);
  // llama.cpp puts the dummy space before text that follows a special token.
  EXPECT_EQ(special, std::vector<int32_t>({1, 15043, 2}));  // <s> ▁Hello </s>
}

TEST(Tokenizer, UserDefinedTokensAlwaysMatch) {
  // In the Gemma vocabulary <b> (200) and </b> (209) are user-defined: HF and llama.cpp match
  // them in any text, and decode shows them.
  const Tokenizer& tok = load(kGemma);
  auto ids = tok.encode("a <b>bold</b> word", {.add_bos = false});
  EXPECT_TRUE(contains(ids, 200));
  EXPECT_TRUE(contains(ids, 209));
  EXPECT_EQ(tok.decode(ids), "a <b>bold</b> word");
}

TEST(Tokenizer, BosAddedOnceFromFileFlags) {
  const Tokenizer& gemma = load(kGemma);
  auto ids = gemma.encode("Hello");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 2);
  auto templated = gemma.encode("<bos><start_of_turn>user\nHello<end_of_turn>\n",
                                {.add_bos = true, .parse_special = true});
  ASSERT_GE(templated.size(), 2u);
  EXPECT_EQ(templated[0], 2);
  EXPECT_EQ(templated[1], 105);
  EXPECT_EQ(std::count(templated.begin(), templated.end(), 2), 1);

  const Tokenizer& llama = load(kLlama);
  auto spm = llama.encode("<s>Hello", {.add_bos = true, .parse_special = true});
  EXPECT_EQ(spm, std::vector<int32_t>({1, 15043}));
  EXPECT_EQ(llama.encode("Hello", {.add_bos = false}), std::vector<int32_t>({15043}));

  // gpt-2's file has no add_bos_token: nothing is added.
  const Tokenizer& gpt2 = load("ggml-vocab-gpt-2.gguf");
  EXPECT_FALSE(gpt2.add_bos());
  EXPECT_EQ(gpt2.encode("Hello"), gpt2.encode("Hello", {.add_bos = false}));
}

TEST(Tokenizer, WordPieceWrapsInClsSep) {
  const Tokenizer& bert = load("ggml-vocab-bert-bge.gguf");
  auto ids = bert.encode("Hello world");
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids.front(), 101);  // [CLS]
  EXPECT_EQ(ids.back(), 102);   // [SEP]
  EXPECT_EQ(bert.decode(ids), "hello world");
}

TEST(Tokenizer, OutOfRangeIdsDecodeAsReplacement) {
  for (const char* name : {kLlama, kGemma, "ggml-vocab-gpt-2.gguf", "ggml-vocab-bert-bge.gguf"}) {
    const Tokenizer& tok = load(name);
    std::vector<int32_t> ids = {-5, tok.n_vocab(), 1 << 30, std::numeric_limits<int32_t>::min()};
    EXPECT_EQ(tok.decode(ids), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD") << name;
    EXPECT_EQ(tok.token_text(tok.n_vocab()), "");
    EXPECT_EQ(tok.token_type(-1), tokenizer::TokenType::kUndefined);
    tokenizer::StreamDecoder stream(tok);
    EXPECT_EQ(stream.push(-1), "\xEF\xBF\xBD");
  }
}

// Pushes ids one at a time; every output must be whole characters, and together they must spell
// what decode spells (decode drops the dummy prefix space, the stream does not).
std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids,
                       std::vector<std::string>* outputs = nullptr) {
  tokenizer::StreamDecoder stream(tok);
  std::string text;
  for (int32_t id : ids) {
    std::string out = stream.push(id);
    EXPECT_TRUE(valid_utf8(out)) << "partial character emitted";
    if (outputs) outputs->push_back(out);
    text += out;
  }
  text += stream.flush();
  return text;
}

TEST(StreamDecoder, HoldsBackCharactersSplitAcrossByteTokens) {
  const Tokenizer& tok = load(kLlama);
  // 🦙 has no piece in the llama vocabulary: it is four byte tokens (<0xF0> <0x9F> <0xA6>
  // <0x99>).
  auto ids = tok.encode("llama 🦙 and 你好", {.add_bos = false});
  int byte_tokens = 0;
  for (int32_t id : ids) byte_tokens += tok.token_type(id) == tokenizer::TokenType::kByte;
  ASSERT_GE(byte_tokens, 4);
  std::vector<std::string> outputs;
  EXPECT_EQ(stream_all(tok, ids, &outputs), " llama 🦙 and 你好");
  EXPECT_EQ(tok.decode(ids), "llama 🦙 and 你好");
  // While the emoji's bytes arrive, nothing is emitted until the last one.
  size_t empty = std::count(outputs.begin(), outputs.end(), std::string());
  EXPECT_GE(empty, 3u);
}

TEST(StreamDecoder, GemmaByteFallbackForRareCjk) {
  const Tokenizer& tok = load(kGemma);
  // U+2A6D6 (CJK Extension B) has no token: byte fallback, four <0xXX> tokens.
  const std::string text = "字\xF0\xAA\x9B\x96字";
  auto ids = tok.encode(text, {.add_bos = false});
  int byte_tokens = 0;
  for (int32_t id : ids) byte_tokens += tok.token_type(id) == tokenizer::TokenType::kByte;
  EXPECT_EQ(byte_tokens, 4);
  EXPECT_EQ(stream_all(tok, ids), text);
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(StreamDecoder, ReplacesBytesThatCannotFormACharacter) {
  const Tokenizer& tok = load(kLlama);
  const int32_t e4 = 3 + 0xE4, b8 = 3 + 0xB8;  // <0xE4> <0xB8>: the start of a 3-byte character
  const int32_t a = tok.encode("a", {.add_bos = false}).back();
  tokenizer::StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(e4), "");
  EXPECT_EQ(stream.push(b8), "");
  EXPECT_EQ(stream.push(a), "\xEF\xBF\xBD\xEF\xBF\xBD" + tok.piece(a));
  EXPECT_EQ(stream.push(e4), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.push(3 + 0x80), "\xEF\xBF\xBD");  // a lone continuation byte
}

const char* kAllVocabularies[] = {
    kLlama,
    kGemma,
    "ggml-vocab-phi-3.gguf",
    "ggml-vocab-gpt-2.gguf",
    "ggml-vocab-gpt-neox.gguf",
    "ggml-vocab-mpt.gguf",
    "ggml-vocab-falcon.gguf",
    "ggml-vocab-starcoder.gguf",
    "ggml-vocab-refact.gguf",
    "ggml-vocab-deepseek-coder.gguf",
    "ggml-vocab-deepseek-llm.gguf",
    "ggml-vocab-bert-bge.gguf",
    "stories260K.gguf",
};

TEST(Tokenizer, ArbitraryBytesNeverBreakTheEncoder) {
  // Random bytes, mostly not UTF-8, and long runs that would expose quadratic behaviour. Every
  // tokenizer returns valid ids; those whose alphabet holds every byte (SentencePiece and Gemma
  // byte fallback, gpt-2's complete byte alphabet) give the bytes back exactly. Other byte-level
  // vocabularies lack tokens for bytes such as 0xC0 or 0xFF that UTF-8 text never contains.
  std::mt19937 rng(1234);
  std::vector<std::string> inputs;
  for (int n = 0; n < 20; ++n) {
    std::string s(1 + rng() % 600, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    inputs.push_back(s);
  }
  inputs.push_back(std::string(200000, ' '));
  inputs.push_back(std::string(200000, 'a'));
  inputs.push_back(std::string(100000, '\n') + "x");
  inputs.push_back(std::string(50000, '\xE4'));
  for (const char* name : kAllVocabularies) {
    const Tokenizer& tok = load(name);
    const bool complete =
        name == kLlama || name == kGemma || std::string_view(name) == "ggml-vocab-gpt-2.gguf";
    for (const std::string& s : inputs) {
      auto ids = tok.encode(s, {.add_bos = false, .parse_special = true});
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab()) << name;
      if (complete) {
        EXPECT_EQ(tok.decode(ids, /*render_special=*/true), s) << name;
      }
    }
  }
}

// Random text from many scripts, whitespace runs, digits and emoji.
std::string random_text(std::mt19937& rng, size_t n_chars) {
  static const std::pair<uint32_t, uint32_t> kRanges[] = {
      {0x20, 0x7E},     {0x20, 0x20},     {0x0A, 0x0A},     {0x09, 0x09},       {0x30, 0x39},
      {0xA0, 0x17F},    {0x300, 0x36F},   {0x391, 0x3C9},   {0x410, 0x44F},     {0x5D0, 0x5EA},
      {0x620, 0x64A},   {0x900, 0x97F},   {0xE01, 0xE5B},   {0x3041, 0x30FF},   {0x4E00, 0x9FA5},
      {0xAC00, 0xD7A3}, {0xFF01, 0xFF5E}, {0x2000, 0x206F}, {0x1F300, 0x1FAFF}, {0x20000, 0x2A6DF},
  };
  std::string s;
  for (size_t i = 0; i < n_chars; ++i) {
    const auto& [lo, hi] = kRanges[rng() % std::size(kRanges)];
    uint32_t cp = lo + rng() % (hi - lo + 1);
    tokenizer::append_utf8(s, cp);
  }
  return s;
}

TEST(Tokenizer, RandomUnicodeTextRoundTripsExactly) {
  // Every tokenizer but WordPiece (lossy by design, see DecodeRoundTrips) gives back any UTF-8
  // text exactly, whatever scripts, spacing and special-looking characters it holds.
  std::mt19937 rng(42);
  std::vector<std::string> inputs;
  for (int n = 0; n < 30; ++n) inputs.push_back(random_text(rng, 1 + rng() % 300));
  for (const char* name : kAllVocabularies) {
    const Tokenizer& tok = load(name);
    if (tok.kind() == tokenizer::ModelKind::kWpm) continue;
    for (const std::string& s : inputs) {
      auto ids = tok.encode(s, {.add_bos = false});
      ASSERT_EQ(tok.decode(ids), s) << name;
      ASSERT_EQ(stream_all(tok, ids).substr(tok.kind() == tokenizer::ModelKind::kSpm ? 1 : 0), s)
          << name;
    }
  }
}

TEST(Tokenizer, CopiesShareStateAcrossThreads) {
  const Tokenizer tok = load("ggml-vocab-gpt-2.gguf");  // a copy
  const std::string text = "The quick brown fox jumps over the lazy dog. 12345 !!";
  const auto expected = tok.encode(text);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) ok[t] += tok.encode(text) == expected;
    });
  }
  for (auto& th : threads) th.join();
  for (int n : ok) EXPECT_EQ(n, 200);
}

// A copy of a real vocabulary file with some keys replaced, parsed from memory.
util::Result<Tokenizer> tokenizer_with(const char* vocab,
                                       std::vector<std::pair<std::string, std::string>> keys) {
  static std::vector<std::vector<uint8_t>> keep_alive;
  auto file = gguf::File::open((testing_util::shared_dir() / "models/vocab" / vocab).string());
  if (!file) return file.error();
  auto writer = gguf::Writer::copy_of(*file);
  for (auto& [k, v] : keys) writer.set(k, gguf::MetaValue::string(v));
  auto bytes = writer.write_to_memory();
  if (!bytes) return bytes.error();
  keep_alive.push_back(std::move(*bytes));
  auto parsed = gguf::File::parse(keep_alive.back(), "edited.gguf");
  if (!parsed) return parsed.error();
  return Tokenizer::from_gguf(*parsed);
}

TEST(Tokenizer, UnknownModelNamedInError) {
  auto tok = tokenizer_with("ggml-vocab-gpt-2.gguf", {{"tokenizer.ggml.model", "t5-unigram"}});
  ASSERT_FALSE(tok.ok());
  const std::string& msg = tok.error().message();
  EXPECT_NE(msg.find("'t5-unigram'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("supported: llama, gpt2, gemma4, bert"), std::string::npos) << msg;
  EXPECT_NE(msg.find("edited.gguf"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(Tokenizer, UnknownPreTokenizerNamedInError) {
  auto tok = tokenizer_with("ggml-vocab-gpt-2.gguf", {{"tokenizer.ggml.pre", "qwen2"}});
  ASSERT_FALSE(tok.ok());
  const std::string& msg = tok.error().message();
  EXPECT_NE(msg.find("'qwen2'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gpt-2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deepseek-llm"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(Tokenizer, PreTokenizerIgnoredOutsideByteLevelBpe) {
  // llama.cpp ignores tokenizer.ggml.pre for SentencePiece and Gemma 4 files.
  auto tok = tokenizer_with(kLlama, {{"tokenizer.ggml.pre", "something-new"}});
  ASSERT_TRUE(tok.ok()) << tok.error().message();
  EXPECT_EQ(tok->encode("Hello", {.add_bos = false}), std::vector<int32_t>({15043}));
}

TEST(Tokenizer, FileWithoutTokenizerRejected) {
  gguf::Writer w;
  w.set("general.architecture", gguf::MetaValue::string("llama"));
  auto bytes = w.write_to_memory();
  ASSERT_TRUE(bytes.ok());
  auto file = gguf::File::parse(*bytes, "empty.gguf");
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message().find("tokenizer.ggml.model is missing"), std::string::npos);
}

}  // namespace
