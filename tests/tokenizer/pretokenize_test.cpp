// Pre-tokenizer splits on hand-checked examples, and the Unicode helpers under them.
#include "tokenizer/pretokenize.h"

#include <gtest/gtest.h>

#include <random>

#include "tokenizer/encoders.h"
#include "tokenizer/unicode.h"

namespace {

using tokenizer::PreTokenizer;

std::vector<std::string> split(PreTokenizer kind, std::string_view text) {
  std::vector<tokenizer::ByteSpan> spans;
  tokenizer::split_words(kind, text, spans);
  std::vector<std::string> words;
  size_t expected_begin = 0;
  for (auto s : spans) {
    EXPECT_EQ(s.begin, expected_begin) << "words must cover the text in order";
    EXPECT_LT(s.begin, s.end);
    expected_begin = s.end;
    words.emplace_back(text.substr(s.begin, s.end - s.begin));
  }
  EXPECT_EQ(expected_begin, text.size());
  return words;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, Gpt2Regex) {
  // Contractions, a space joining the word after it, and \s+(?!\S) leaving the last space of a
  // run to the next word.
  EXPECT_EQ(split(PreTokenizer::kGpt2, "Hello world's  test\n\n 123!!"),
            Words({"Hello", " world", "'s", " ", " test", "\n\n", " 123", "!!"}));
  EXPECT_EQ(split(PreTokenizer::kGpt2, "y'all 'RE  "), Words({"y", "'", "all", " '", "RE", "  "}));
  EXPECT_EQ(split(PreTokenizer::kGpt2, "\t\tx"), Words({"\t", "\t", "x"}));
  EXPECT_EQ(split(PreTokenizer::kGpt2, "über 3³ 東京"), Words({"über", " 3³", " 東京"}));
}

TEST(PreTokenizer, FalconIsolatesPunctuationAndDigitTriples) {
  EXPECT_EQ(split(PreTokenizer::kFalcon, "a+b=12345, `x`"),
            Words({"a", "+", "b", "=", "123", "45", ",", " ", "`", "x", "`"}));
}

TEST(PreTokenizer, DefaultLikeLlamaCpp) {
  // llama.cpp's default: punctuation runs (not the backtick), the GPT-2 regex, digit runs, then
  // ASCII digit triples.
  EXPECT_EQ(split(PreTokenizer::kDefault, "it's 12345 `x`"),
            Words({"it", "'", "s", " ", "123", "45", " `", "x", "`"}));
}

TEST(PreTokenizer, StarcoderSplitsEveryDigit) {
  EXPECT_EQ(split(PreTokenizer::kStarcoder, "x 2024"), Words({"x", " ", "2", "0", "2", "4"}));
}

TEST(PreTokenizer, DeepseekCoder) {
  EXPECT_EQ(split(PreTokenizer::kDeepseekCoder, "int x=42;\n你好 ok"),
            Words({"int", " x", "=", "4", "2", ";", "\n", "你好", " ok"}));
}

TEST(PreTokenizer, DeepseekLlm) {
  // \s+$ takes the trailing spaces of a piece; Cyrillic is in the letter class, CJK is not.
  EXPECT_EQ(split(PreTokenizer::kDeepseekLlm, "Привет, мир 123  \n中文"),
            Words({"Привет", ",", " мир", " ", "123", "  ", "\n", "中文"}));
}

TEST(PreTokenizer, LongWhitespaceRunIsLinear) {
  std::string text(300000, ' ');
  text += "x";
  for (auto kind : {PreTokenizer::kGpt2, PreTokenizer::kDeepseekLlm, PreTokenizer::kDefault}) {
    auto words = split(kind, text);
    EXPECT_LE(words.size(), 3u);
  }
}

TEST(PreTokenizer, InvalidUtf8StillCoversText) {
  std::mt19937 rng(7);
  for (int n = 0; n < 50; ++n) {
    std::string s(rng() % 200, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    for (auto kind :
         {PreTokenizer::kGpt2, PreTokenizer::kFalcon, PreTokenizer::kStarcoder,
          PreTokenizer::kDeepseekCoder, PreTokenizer::kDeepseekLlm, PreTokenizer::kDefault}) {
      split(kind, s);  // checks coverage
    }
  }
}

TEST(PreTokenizer, NamesAndErrors) {
  EXPECT_EQ(*tokenizer::pre_tokenizer_from_name("mpt"), PreTokenizer::kGpt2);
  EXPECT_EQ(*tokenizer::pre_tokenizer_from_name("refact"), PreTokenizer::kStarcoder);
  auto bad = tokenizer::pre_tokenizer_from_name("llama-bpe");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("'llama-bpe'"), std::string::npos);
  EXPECT_NE(bad.error().message().find("default, gpt-2, mpt, falcon"), std::string::npos);
}

TEST(Unicode, DecodeUtf8RejectsMalformedSequences) {
  using tokenizer::decode_utf8;
  using tokenizer::kInvalidCodepoint;
  EXPECT_EQ(decode_utf8("\xE2\x96\x81", 0).cp, 0x2581u);
  EXPECT_EQ(decode_utf8("\xF0\x9F\xA6\x99", 0).cp, 0x1F999u);
  for (std::string_view bad : {"\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x96", "\x80",
                               "\xF8\x88\x80\x80\x80"}) {
    auto c = decode_utf8(bad, 0);
    EXPECT_EQ(c.cp, kInvalidCodepoint) << bad;
    EXPECT_EQ(c.len, 1u);
  }
}

TEST(Unicode, CategoriesFromGeneratedTables) {
  using namespace tokenizer;
  EXPECT_TRUE(codepoint_flags('A') & kLetter);
  EXPECT_TRUE(codepoint_flags(0x0663) & kNumber);       // ARABIC-INDIC DIGIT THREE
  EXPECT_TRUE(codepoint_flags(0x00B2) & kNumber);       // SUPERSCRIPT TWO (No)
  EXPECT_TRUE(codepoint_flags(0x3000) & kWhitespace);   // IDEOGRAPHIC SPACE
  EXPECT_TRUE(codepoint_flags(0x0085) & kWhitespace);   // NEXT LINE
  EXPECT_FALSE(codepoint_flags(0x200B) & kWhitespace);  // ZERO WIDTH SPACE is Cf
  EXPECT_TRUE(codepoint_flags(0x00BF) & kPunctuation);
  EXPECT_TRUE(codepoint_flags('$') & kSymbol);
  EXPECT_TRUE(codepoint_flags(0x0301) & kMark);
  EXPECT_TRUE(codepoint_flags(0x1F999) & kSymbol);   // astral, by binary search
  EXPECT_TRUE(codepoint_flags(0x20000) & kLetter);   // CJK Extension B
  EXPECT_TRUE(codepoint_flags(0xE0001) & kControl);  // LANGUAGE TAG (Cf)
  EXPECT_TRUE(codepoint_flags(kInvalidCodepoint) & kSymbol);
}

TEST(Unicode, Gpt2ByteAlphabetIsABijection) {
  std::vector<bool> seen(512, false);
  for (int b = 0; b < 256; ++b) {
    uint32_t c = tokenizer::byte_to_gpt2_char(static_cast<uint8_t>(b));
    ASSERT_LT(c, 512u);
    EXPECT_FALSE(seen[c]);
    seen[c] = true;
    EXPECT_EQ(tokenizer::gpt2_char_to_byte(c), b);
  }
  EXPECT_EQ(tokenizer::byte_to_gpt2_char(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(tokenizer::byte_to_gpt2_char('\n'), 0x10Au);  // 'Ċ'
}

TEST(BertWords, NormalizesLikeHfBertNormalizer) {
  using tokenizer::bert_words;
  EXPECT_EQ(bert_words("Héllo, WORLD!"), Words({"hello", ",", "world", "!"}));
  EXPECT_EQ(bert_words("你好abc"), Words({"你", "好", "abc"}));
  EXPECT_EQ(bert_words("a\tb\u00A0c  d\x01"
                       "e"),
            Words({"a", "b", "c", "de"}));
  EXPECT_EQ(bert_words("Äpfel İstanbul ﬁ"), Words({"apfel", "istanbul", "ﬁ"}));
  EXPECT_EQ(bert_words("한"), Words({"\u1112\u1161\u11AB"}));  // Hangul decomposes to jamo
  EXPECT_EQ(bert_words("$5+x"), Words({"$", "5", "+", "x"}));  // ASCII symbols are punctuation
  EXPECT_TRUE(bert_words(" \n\t").empty());
}

}  // namespace
