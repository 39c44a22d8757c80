// WordPiece encoding (tokenizer.ggml.model "bert") with BERT's normalizer and pre-tokenizer.
#include <algorithm>

#include "tokenizer/encoders.h"
#include "tokenizer/unicode.h"

namespace tokenizer {
namespace {

// HF's BertNormalizer treats \t \n \r as whitespace although they are control characters.
bool bert_whitespace(uint32_t cp) {
  return cp == '\t' || cp == '\n' || cp == '\r' || (codepoint_flags(cp) & kWhitespace);
}

// Everything in general category C (Cc, Cf, Co, Cs, Cn) except \t \n \r; dropped from the text.
bool bert_control(uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  return (codepoint_flags(cp) & (kControl | kUnassigned)) != 0;
}

// The CJK Unified Ideographs blocks, with the bounds HF's code uses (0x2B920, not 0x2B820).
bool bert_chinese(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// ASCII punctuation (which includes symbols such as $ + < = > ^ ` | ~) or general category P.
bool bert_punctuation(uint32_t cp) {
  if (cp < 0x80)
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
           (cp >= 0x7B && cp <= 0x7E);
  return (codepoint_flags(cp) & kPunctuation) != 0;
}

// HF WordPiece's max_input_chars_per_word: longer words become [UNK] whole.
constexpr size_t kMaxWordChars = 100;

}  // namespace

std::vector<std::string> bert_words(std::string_view text) {
  // Normalizer, in HF's order: clean (drop NUL, U+FFFD, controls; whitespace to ' '), pad CJK
  // ideographs with spaces, NFD and drop nonspacing marks, lowercase.
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  std::vector<uint32_t> tmp;
  for (size_t pos = 0; pos < text.size();) {
    Utf8Char c = decode_utf8(text, pos);
    pos += c.len;
    uint32_t cp = c.cp == kInvalidCodepoint ? 0xFFFD : c.cp;
    if (cp == 0 || cp == 0xFFFD || bert_control(cp)) continue;
    if (bert_whitespace(cp)) {
      cps.push_back(' ');
      continue;
    }
    const bool ideograph = bert_chinese(cp);
    if (ideograph) cps.push_back(' ');
    tmp.clear();
    append_stripped_decomposition(cp, tmp);
    for (uint32_t d : tmp) append_lowercase(d, cps);
    if (ideograph) cps.push_back(' ');
  }

  // Pre-tokenizer: split on whitespace, every punctuation character is a word of its own.
  std::vector<std::string> words;
  std::string word;
  auto finish = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (uint32_t cp : cps) {
    if (bert_whitespace(cp)) {
      finish();
    } else if (bert_punctuation(cp)) {
      finish();
      append_utf8(word, cp);
      finish();
    } else {
      append_utf8(word, cp);
    }
  }
  finish();
  return words;
}

void WpmEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  // Converters store word-initial pieces with a ▁ prefix and continuations ("##x") bare, so the
  // first piece of a word is looked up with the ▁ in front.
  std::string prefixed;
  for (const std::string& word : bert_words(text)) {
    size_t n_chars = 0;
    for (size_t pos = 0; pos < word.size(); pos += decode_utf8(word, pos).len) ++n_chars;
    const size_t mark = out.size();
    bool ok = n_chars <= kMaxWordChars;
    prefixed.assign("\xE2\x96\x81").append(word);
    std::string_view w = prefixed;
    for (size_t i = 0; ok && i < w.size();) {
      int32_t found = kNoToken;
      size_t j = std::min(w.size(), i + vocab_->max_token_bytes);
      for (; j > i; --j) {
        found = vocab_->find(w.substr(i, j - i));
        if (found != kNoToken) break;
      }
      if (found == kNoToken) {
        ok = false;
        break;
      }
      out.push_back(found);
      i = j;
    }
    if (!ok) {
      out.resize(mark);
      if (vocab_->unk != kNoToken) out.push_back(vocab_->unk);
    }
  }
}

}  // namespace tokenizer
