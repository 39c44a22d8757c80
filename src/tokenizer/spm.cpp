// SentencePiece BPE encoding by piece scores (tokenizer.ggml.model "llama").
#include <algorithm>
#include <queue>

#include "tokenizer/encoders.h"
#include "tokenizer/unicode.h"

namespace tokenizer {
namespace {

// A run of text[begin, begin + len); merged-away symbols have len 0.
struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t begin;
  uint32_t len;
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t len;  // bytes of the merged piece; a mismatch later means the bigram is stale
};

// Highest score first; on equal scores the leftmost pair, as SentencePiece does.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

std::vector<uint32_t> chars_joining_space(const std::vector<std::string_view>& texts) {
  constexpr uint32_t kSpace = 0x2581;  // ▁
  std::vector<uint32_t> out;
  for (std::string_view t : texts) {
    uint32_t prev = kSpace;
    for (size_t pos = 0; pos < t.size();) {
      Utf8Char c = decode_utf8(t, pos);
      if (c.cp == kSpace && prev != kSpace) out.push_back(prev);
      prev = c.cp;
      pos += c.len;
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

SpmEncoder::SpmEncoder(const Vocab& vocab) : vocab_(&vocab) {
  std::vector<std::string_view> pieces;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (piece_id(vocab.text(id)) == id) pieces.push_back(vocab.text(id));
  }
  joins_space_ = chars_joining_space(pieces);
}

int32_t SpmEncoder::piece_id(std::string_view piece) const {
  int32_t id = vocab_->find(piece);
  if (id == kNoToken) return kNoToken;
  // Control, unknown, unused and byte pieces are never produced from text: "<s>" typed by a
  // user stays three characters.
  TokenType t = vocab_->type(id);
  return t == TokenType::kNormal || t == TokenType::kUserDefined || t == TokenType::kUndefined
             ? id
             : kNoToken;
}

void SpmEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  WordCache cache;
  split_at_word_starts(text, joins_space_, [&](std::string_view word) {
    if (cache.lookup(word, out)) return;
    const size_t from = out.size();
    encode_segment(word, out);
    cache.store(word, out, from);
  });
}

void SpmEncoder::encode_segment(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    uint32_t len = decode_utf8(text, pos).len;
    int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, -1, static_cast<uint32_t>(pos), len});
    if (index > 0) symbols[index - 1].next = index;
    pos += len;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t len = symbols[left].len + symbols[right].len;
    int32_t id = piece_id(text.substr(symbols[left].begin, len));
    if (id != kNoToken) queue.push({vocab_->scores[id], left, right, len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Symbol& left = symbols[b.left];
    Symbol& right = symbols[b.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != b.len) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }

  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    std::string_view piece = text.substr(symbols[i].begin, symbols[i].len);
    int32_t id = piece_id(piece);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (unsigned char byte : piece) {
      int32_t byte_id = vocab_->byte_tokens[byte];
      if (byte_id == kNoToken) byte_id = vocab_->unk;
      if (byte_id != kNoToken) out.push_back(byte_id);
    }
  }
}

}  // namespace tokenizer
