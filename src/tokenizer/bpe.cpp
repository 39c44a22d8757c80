// BPE encoding by merge rank: byte-level ("gpt2") and over UTF-8 characters ("gemma4").
#include <algorithm>
#include <queue>
#include <string>
#include <unordered_map>

#include "tokenizer/encoders.h"
#include "tokenizer/unicode.h"
#include "util/log.h"

namespace tokenizer {
namespace {

constexpr int32_t kDead = -2;  // a symbol merged into its left neighbour

// Lowest rank first; on equal ranks the leftmost pair.
struct CandidateOrder {
  bool operator()(const BpeEncoder::Candidate& a, const BpeEncoder::Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

util::Result<BpeEncoder> BpeEncoder::build(const gguf::File& file, const Vocab& vocab,
                                           bool byte_level) {
  BpeEncoder e;
  e.vocab_ = &vocab;
  e.byte_level_ = byte_level;
  const gguf::Value* merges = file.find("tokenizer.ggml.merges");
  if (!merges || !merges->is_array() || merges->array_type() != gguf::ValueType::kString) {
    return util::errorf(
        "{}: tokenizer.ggml.merges is missing or not a string array; BPE "
        "tokenizers need their merge list",
        file.name());
  }

  // Pass 1: split each "left right" entry (at the first space after position 0, so a left part
  // may itself be a space) and give merge results that are not tokens ids of their own.
  const auto& entries = merges->array_strings();
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  pairs.reserve(entries.size());
  std::vector<int32_t> joined_ids(entries.size(), kNoToken);
  std::unordered_map<std::string, int32_t> synthetic;
  std::string joined;
  size_t malformed = 0;
  for (std::string_view entry : entries) {
    size_t space = entry.size() > 1 ? entry.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos) {
      ++malformed;
      pairs.emplace_back();
      continue;
    }
    pairs.emplace_back(entry.substr(0, space), entry.substr(space + 1));
    joined.assign(pairs.back().first).append(pairs.back().second);
    int32_t id = vocab.find(joined);
    if (id == kNoToken) {
      id = synthetic.emplace(joined, vocab.size() + static_cast<int32_t>(synthetic.size()))
               .first->second;
    }
    joined_ids[pairs.size() - 1] = id;
  }
  e.n_synthetic_ = static_cast<int32_t>(synthetic.size());
  auto resolve = [&](std::string_view text) {
    int32_t id = vocab.find(text);
    if (id != kNoToken) return id;
    auto it = synthetic.find(std::string(text));
    return it == synthetic.end() ? kNoToken : it->second;
  };

  // Pass 2: the rank of each (left, right) pair; the first (lowest) rank wins on duplicates.
  size_t unusable = 0;
  for (size_t rank = 0; rank < pairs.size(); ++rank) {
    const auto& [left, right] = pairs[rank];
    if (left.empty()) continue;
    int32_t l = resolve(left), r = resolve(right);
    if (l == kNoToken || r == kNoToken) {
      ++unusable;
      continue;
    }
    if (e.merges_.find(pair_key(l, r))) continue;
    e.merges_.insert(pair_key(l, r), Merge{static_cast<int32_t>(rank), joined_ids[rank]});
  }
  if (malformed + unusable > 0) {
    util::log_warn("{}: {} of {} merges are malformed or name unknown tokens; they are ignored",
                   file.name(), malformed + unusable, entries.size());
  }

  // Initial symbols: one per byte (byte-level) or per character.
  if (byte_level) {
    std::string ch;
    std::string missing;
    for (int b = 0; b < 256; ++b) {
      ch.clear();
      append_utf8(ch, byte_to_gpt2_char(static_cast<uint8_t>(b)));
      e.byte_char_id_[b] = vocab.find(ch);
      // C0, C1 and F5..FF never occur in UTF-8 text; many vocabularies rightly lack them.
      const bool in_utf8 = b != 0xC0 && b != 0xC1 && b < 0xF5;
      if (e.byte_char_id_[b] == kNoToken && in_utf8) missing += fmt::format(" 0x{:02X}", b);
    }
    if (!missing.empty()) {
      util::log_info(
          "{}: the byte alphabet has no token for byte(s){}; text containing them "
          "loses those bytes when encoded",
          file.name(), missing);
    }
  } else {
    std::vector<std::string_view> texts;
    for (int32_t id = 0; id < vocab.size(); ++id) texts.push_back(vocab.text(id));
    for (const auto& [text, id] : synthetic) texts.push_back(text);
    e.joins_space_ = chars_joining_space(texts);
    e.bmp_char_id_.assign(0x10000, kNoToken);
    for (int32_t id = 0; id < vocab.size(); ++id) {
      std::string_view text = vocab.text(id);
      if (text.empty()) continue;
      Utf8Char c = decode_utf8(text, 0);
      if (c.len == text.size() && c.cp < 0x10000 && vocab.find(text) == id) {
        e.bmp_char_id_[c.cp] = e.char_id(c.cp, text);
      }
    }
  }
  return e;
}

// A character's own token, if it may start a word: control, unknown and byte tokens never come
// from text.
int32_t BpeEncoder::char_id(uint32_t cp, std::string_view text) const {
  int32_t id = cp < 0x10000 && !bmp_char_id_.empty() && bmp_char_id_[cp] != kNoToken
                   ? bmp_char_id_[cp]
                   : vocab_->find(text);
  if (id == kNoToken) return kNoToken;
  TokenType t = vocab_->type(id);
  return t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kByte ? kNoToken
                                                                                       : id;
}

void BpeEncoder::emit_fallback(std::string_view bytes, std::vector<int32_t>& out) const {
  for (unsigned char b : bytes) {
    // Byte-level: each byte's character token; otherwise SentencePiece byte fallback <0xXX>.
    int32_t id = byte_level_ ? byte_char_id_[b] : vocab_->byte_tokens[b];
    if (id == kNoToken) id = vocab_->unk;
    if (id != kNoToken) out.push_back(id);
  }
}

void BpeEncoder::encode_word(std::string_view word, std::vector<int32_t>& out,
                             Scratch& scratch) const {
  auto encode_cached = [&](std::string_view segment) {
    if (scratch.cache.lookup(segment, out)) return;
    const size_t from = out.size();
    merge_segment(segment, out, scratch);
    scratch.cache.store(segment, out, from);
  };
  if (byte_level_) return encode_cached(word);
  split_at_word_starts(word, joins_space_, encode_cached);
}

void BpeEncoder::merge_segment(std::string_view word, std::vector<int32_t>& out,
                               Scratch& scratch) const {
  if (word.empty()) return;
  std::vector<Symbol>& symbols = scratch.symbols;
  symbols.clear();
  for (size_t pos = 0; pos < word.size();) {
    int32_t id;
    uint32_t len;
    if (byte_level_) {
      id = byte_char_id_[static_cast<unsigned char>(word[pos])];
      len = 1;
    } else {
      Utf8Char c = decode_utf8(word, pos);
      len = c.len;
      id = c.cp == kInvalidCodepoint ? kNoToken : char_id(c.cp, word.substr(pos, len));
    }
    int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back(
        {id, index - 1, -1, static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + len)});
    if (index > 0) symbols[index - 1].next = index;
    pos += len;
  }

  std::vector<Candidate>& queue = scratch.queue;  // a heap ordered by CandidateOrder
  queue.clear();
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    int32_t l = symbols[left].id, r = symbols[right].id;
    if (l < 0 || r < 0) return;
    if (const Merge* m = merges_.find(pair_key(l, r))) {
      queue.push_back({m->rank, left, right, l, r});
      std::push_heap(queue.begin(), queue.end(), CandidateOrder());
    }
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), CandidateOrder());
    Candidate c = queue.back();
    queue.pop_back();
    Symbol& left = symbols[c.left];
    if (left.id != c.left_id || left.next != c.right || symbols[c.right].id != c.right_id) continue;
    Symbol& right = symbols[c.right];
    left.id = merges_.find(pair_key(c.left_id, c.right_id))->result;
    left.end = right.end;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    right.id = kDead;
    try_add(left.prev, c.left);
    try_add(c.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0 && s.id < vocab_->size()) {
      out.push_back(s.id);
    } else {
      emit_fallback(word.substr(s.begin, s.end - s.begin), out);
    }
  }
}

}  // namespace tokenizer
