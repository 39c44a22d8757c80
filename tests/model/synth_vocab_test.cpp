// synth's built-in Gemma 4 vocabulary against spec §5: the special tokens at their published
// ids and types, the spec's example prompt tokenized as §5.4 says, lossless round trips with byte
// fallback, and (through the CLI) Gemma 4's chat template carried in the file.
#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/file.h"
#include "model/synth.h"
#include "testing/testing.h"
#include "tokenizer/tokenizer.h"

namespace {

using tokenizer::TokenType;

std::string write_tiny(const std::string& chat_template = "") {
  const auto path = testing_util::temp_dir() / "tiny-e.gguf";
  auto w = model::synth_writer(
      {.arch = "gemma4", .shape = "tiny-e", .no_weights = true, .chat_template = chat_template});
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
  EXPECT_TRUE(w->write(path.string()).ok());
  return path.string();
}

tokenizer::Tokenizer open_tokenizer(const std::string& path) {
  auto file = gguf::File::open(path);
  EXPECT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message());
  return std::move(*tok);
}

TEST(SynthVocab, Gemma4SpecialTokensAtTheirSpecIds) {
  const auto tok = open_tokenizer(write_tiny());
  EXPECT_EQ(tok.model_name(), "gemma4");
  EXPECT_EQ(tok.n_vocab(), 512);
  struct Special {
    int32_t id;
    const char* text;
    TokenType type;
  };
  // Spec §5.1 ids; §5.2: seven tokens are user-defined so they show when decoded.
  const Special specials[] = {
      {0, "<pad>", TokenType::kControl},
      {1, "<eos>", TokenType::kControl},
      {2, "<bos>", TokenType::kControl},
      {3, "<unk>", TokenType::kUnknown},
      {4, "<mask>", TokenType::kControl},
      {46, "<|tool>", TokenType::kControl},
      {47, "<tool|>", TokenType::kControl},
      {48, "<|tool_call>", TokenType::kUserDefined},
      {49, "<tool_call|>", TokenType::kUserDefined},
      {50, "<|tool_response>", TokenType::kUserDefined},
      {51, "<tool_response|>", TokenType::kUserDefined},
      {52, "<|\"|>", TokenType::kUserDefined},
      {98, "<|think|>", TokenType::kControl},
      {100, "<|channel>", TokenType::kUserDefined},
      {101, "<channel|>", TokenType::kUserDefined},
      {105, "<|turn>", TokenType::kControl},
      {106, "<turn|>", TokenType::kControl},
      {107, "\n", TokenType::kNormal},
      {108, "\n\n", TokenType::kNormal},
      {109, "\n\n\n", TokenType::kNormal},
      {238, "<0x00>", TokenType::kByte},
      {493, "<0xFF>", TokenType::kByte},
  };
  for (const auto& s : specials) {
    EXPECT_EQ(tok.token_text(s.id), s.text) << s.id;
    EXPECT_EQ(tok.token_type(s.id), s.type) << s.id;
  }
  EXPECT_EQ(tok.bos(), 2);
  EXPECT_EQ(tok.eos(), 1);
  // Spec §8.2: stop on <eos> and <turn|>.
  EXPECT_TRUE(tok.is_end_of_generation(1));
  EXPECT_TRUE(tok.is_end_of_generation(106));
  EXPECT_FALSE(
      tok.is_end_of_generation(50));  // <|tool_response> ends a reply only when tools are on
}

TEST(SynthVocab, Gemma4PromptTokenizesAsTheSpecSays) {
  const auto tok = open_tokenizer(write_tiny());
  // Spec §5.4's example: "→ token stream starts [2, 105, …]", BOS not doubled.
  const auto ids =
      tok.encode("<bos><|turn>user\nHello<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
                 {.add_bos = true, .parse_special = true});
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 105);
  EXPECT_EQ(ids.back(), 101);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 106), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 100), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 107),
            4);  // each "\n" after a marker or role is one token
  // User-defined tokens are matched in any text and shown when decoded; control tokens are not.
  const auto call =
      tok.encode("<|tool_call>call:f{a:<|\"|>x<|\"|>}<tool_call|>", {.add_bos = false});
  EXPECT_EQ(call.front(), 48);
  EXPECT_EQ(call.back(), 49);
  EXPECT_EQ(std::count(call.begin(), call.end(), 52), 2);
  EXPECT_EQ(tok.decode(call), "<|tool_call>call:f{a:<|\"|>x<|\"|>}<tool_call|>");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{105, 106}), "");
}

TEST(SynthVocab, Gemma4RoundTripsAnyTextWithByteFallback) {
  const auto tok = open_tokenizer(write_tiny());
  for (const std::string text :
       {"Hello, world! The call was declared.", "tabs\tand\nnewlines\n\n\nend",
        "h\xC3\xA9llo \xF0\x9F\x98\x80 \xE4\xB8\xAD", "{\"json\": [1, 2.5e3, null]}",
        "  spaced  out  "}) {
    const auto ids = tok.encode(text, {.add_bos = false});
    EXPECT_EQ(tok.decode(ids), text);
  }
  // "é" has no token: its two bytes fall back to <0xC3> <0xA9> (ids 238 + byte, spec §5.1).
  EXPECT_EQ(tok.encode("\xC3\xA9", {.add_bos = false}),
            (std::vector<int32_t>{238 + 0xC3, 238 + 0xA9}));
  // Words of the tool syntax are merged.
  EXPECT_EQ(tok.encode("call", {.add_bos = false}).size(), 1u);
}

TEST(SynthVocab, TheCliWritesGemma4sChatTemplate) {
  const auto dir = testing_util::temp_dir();
  const std::string path = (dir / "m.gguf").string();
  std::string out;
  ASSERT_EQ(
      testing_util::run_command(testing_util::headroom_binary().string() +
                                    " synth --arch gemma4 --shape tiny-e --no-weights -o " + path,
                                &out),
      0);
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.ok());
  auto stored = file->get_string("tokenizer.chat_template");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ(std::string(**stored),
            testing_util::read_text(testing_util::shared_dir() /
                                    "testdata/templates/google-gemma-4-31B-it.jinja"));
}

}  // namespace
