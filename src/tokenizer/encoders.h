// The algorithms behind Tokenizer: each encoder turns plain text (no special tokens in it) into
// ids.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/file.h"
#include "tokenizer/flat_map.h"
#include "tokenizer/vocab.h"
#include "util/result.h"

namespace tokenizer {

// SentencePiece BPE ("llama"): repeatedly merges the adjacent pair whose concatenation is the
// best-scoring piece; characters left without a piece fall back to <0xXX> byte tokens.
class SpmEncoder {
 public:
  explicit SpmEncoder(const Vocab& vocab) : vocab_(&vocab) {}
  // `text` has its spaces already escaped as ▁ (and the dummy prefix added where wanted).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  // The id of a piece that text may merge into (normal or user-defined), or kNoToken.
  int32_t piece_id(std::string_view piece) const;
  const Vocab* vocab_;
};

// BPE by merge rank, over GPT-2 byte characters ("gpt2") or over UTF-8 characters ("gemma4").
class BpeEncoder {
 public:
  // Resolves tokenizer.ggml.merges into pairs of ids. `byte_level` selects the GPT-2 alphabet.
  static util::Result<BpeEncoder> build(const gguf::File& file, const Vocab& vocab,
                                        bool byte_level);
  // Appends the ids of one word: raw bytes when byte-level, else UTF-8 text with ▁ for spaces.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  size_t n_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank = 0;
    int32_t result = kNoToken;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  int32_t char_id(uint32_t cp, std::string_view text) const;
  void emit_fallback(std::string_view bytes, std::vector<int32_t>& out) const;

  const Vocab* vocab_ = nullptr;
  bool byte_level_ = false;
  FlatMap<Merge> merges_;
  // Merge results that are not tokens get ids from vocab size upwards; they can merge further
  // but are emitted through the fallback.
  int32_t n_synthetic_ = 0;
  std::array<int32_t, 256> byte_char_id_{};  // byte-level: the token of each byte's character
  std::vector<int32_t> bmp_char_id_;         // otherwise: the token of each single BMP character
};

// WordPiece ("bert"): BERT's normalization and word split, then longest-match-first pieces.
class WpmEncoder {
 public:
  explicit WpmEncoder(const Vocab& vocab) : vocab_(&vocab) {}
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  const Vocab* vocab_;
};

// BERT's uncased normalizer and pre-tokenizer, as HF tokenizers runs them: drop control
// characters, isolate CJK ideographs, strip accents (NFD minus Mn), lowercase, split on
// whitespace and isolate punctuation. Returns the words in order.
std::vector<std::string> bert_words(std::string_view text);

}  // namespace tokenizer
