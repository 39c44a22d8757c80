// The algorithms behind Tokenizer: each encoder turns plain text (no special tokens in it) into
// ids.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gguf/file.h"
#include "tokenizer/flat_map.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"
#include "util/result.h"

namespace tokenizer {

// Ids of words already encoded during one encode call.
class WordCache {
 public:
  // Appends the cached ids of `word` to out; false if the word has not been seen.
  bool lookup(std::string_view word, std::vector<int32_t>& out) const {
    auto it = ranges_.find(word);
    if (it == ranges_.end()) return false;
    out.insert(out.end(), ids_.begin() + it->second.first, ids_.begin() + it->second.second);
    return true;
  }
  // Records that `word` encoded to out[from, out.size()). Long words are rarely repeated.
  void store(std::string_view word, const std::vector<int32_t>& out, size_t from) {
    if (word.size() > 64) return;
    const size_t begin = ids_.size();
    ids_.insert(ids_.end(), out.begin() + from, out.end());
    ranges_.emplace(word, std::make_pair(begin, ids_.size()));
  }

 private:
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> ranges_;
  std::vector<int32_t> ids_;
};

// SentencePiece BPE ("llama"): repeatedly merges the adjacent pair whose concatenation is the
// best-scoring piece; characters left without a piece fall back to <0xXX> byte tokens.
class SpmEncoder {
 public:
  explicit SpmEncoder(const Vocab& vocab);
  // `text` has its spaces already escaped as ▁ (and the dummy prefix added where wanted).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  // The id of a piece that text may merge into (normal or user-defined), or kNoToken.
  int32_t piece_id(std::string_view piece) const;
  void encode_segment(std::string_view text, std::vector<int32_t>& out) const;
  const Vocab* vocab_;
  // Characters that some piece holds right before a ▁ (see split_at_word_starts).
  std::vector<uint32_t> joins_space_;
};

// BPE by merge rank, over GPT-2 byte characters ("gpt2") or over UTF-8 characters ("gemma4").
class BpeEncoder {
 public:
  struct Symbol;
  struct Candidate;
  // Buffers reused across the words of one encode call (never shared between threads), and the
  // ids of words already seen in it: natural text repeats its words, and a word always encodes
  // the same way. Keys view the caller's text, which outlives the call.
  struct Scratch {
    std::vector<Symbol> symbols;
    std::vector<Candidate> queue;
    WordCache cache;
  };

  // Resolves tokenizer.ggml.merges into pairs of ids. `byte_level` selects the GPT-2 alphabet.
  static util::Result<BpeEncoder> build(const gguf::File& file, const Vocab& vocab,
                                        bool byte_level);
  // Appends the ids of one word: raw bytes when byte-level, else UTF-8 text with ▁ for spaces.
  void encode_word(std::string_view word, std::vector<int32_t>& out, Scratch& scratch) const;
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
  void merge_segment(std::string_view word, std::vector<int32_t>& out, Scratch& scratch) const;

  const Vocab* vocab_ = nullptr;
  bool byte_level_ = false;
  FlatMap<Merge> merges_;
  // Merge results that are not tokens get ids from vocab size upwards; they can merge further
  // but are emitted through the fallback.
  int32_t n_synthetic_ = 0;
  std::array<int32_t, 256> byte_char_id_{};  // byte-level: the token of each byte's character
  std::vector<int32_t> bmp_char_id_;         // otherwise: the token of each single BMP character
  std::vector<uint32_t> joins_space_;        // otherwise: see split_at_word_starts
};

struct BpeEncoder::Symbol {
  int32_t id;  // token, kNoToken (a character without one: never merges), or -2 merged away
  int32_t prev;
  int32_t next;
  uint32_t begin;  // the symbol covers word[begin, end)
  uint32_t end;
};

struct BpeEncoder::Candidate {
  int32_t rank;
  int32_t left;
  int32_t right;
  int32_t left_id;  // the pair is stale unless both symbols still hold these ids
  int32_t right_id;
};

// Characters that precede ▁ inside some piece of `texts` (other than ▁ itself), sorted. Where a
// ▁ follows any other character, no merge can cross the boundary, so text splits there into
// words that merge independently: the result is the same, and the work stays per word instead
// of one priority queue over the whole input.
std::vector<uint32_t> chars_joining_space(const std::vector<std::string_view>& texts);
// Calls encode(segment) for each such word of `text`, in order.
template <class Encode>
void split_at_word_starts(std::string_view text, const std::vector<uint32_t>& joins_space,
                          Encode encode);

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

template <class Encode>
void split_at_word_starts(std::string_view text, const std::vector<uint32_t>& joins_space,
                          Encode encode) {
  constexpr uint32_t kSpace = 0x2581;  // ▁
  size_t begin = 0;
  uint32_t prev = kSpace;
  for (size_t pos = 0; pos < text.size();) {
    Utf8Char c = decode_utf8(text, pos);
    if (c.cp == kSpace && prev != kSpace && pos > begin &&
        !std::binary_search(joins_space.begin(), joins_space.end(), prev)) {
      encode(text.substr(begin, pos - begin));
      begin = pos;
    }
    prev = c.cp;
    pos += c.len;
  }
  if (begin < text.size()) encode(text.substr(begin));
}

}  // namespace tokenizer
