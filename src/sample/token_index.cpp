// Indexing a vocabulary for constrained decoding (see token_index.h).
#include "sample/token_index.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace sample {
namespace {

TokenWalk make_walk(const TokenIndex& index, bool (*keep)(const TokenIndex&, int32_t)) {
  TokenWalk w;
  for (int32_t id = 0; id < index.n_vocab; ++id) {
    if (!index.bytes[id].empty() && keep(index, id)) w.ids.push_back(id);
  }
  std::sort(w.ids.begin(), w.ids.end(),
            [&](int32_t a, int32_t b) { return index.bytes[a] < index.bytes[b]; });
  w.lcp.resize(w.ids.size(), 0);
  for (size_t i = 1; i < w.ids.size(); ++i) {
    const std::string& a = index.bytes[w.ids[i - 1]];
    const std::string& b = index.bytes[w.ids[i]];
    uint32_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    w.lcp[i] = n;
  }
  return w;
}

std::shared_ptr<const TokenIndex> build_index(const tokenizer::Tokenizer& tok,
                                              const TokenIndexOptions& options) {
  auto index = std::make_shared<TokenIndex>();
  index->n_vocab = tok.n_vocab();
  index->bytes.resize(index->n_vocab);
  index->plain_chars.assign(index->n_vocab, -1);
  index->has_angle.assign(index->n_vocab, 0);
  index->end_of_generation.assign(index->n_vocab, 0);
  for (int32_t id : tok.end_of_generation()) {
    if (id >= 0 && id < index->n_vocab) index->end_of_generation[id] = 1;
  }
  for (int32_t id : options.extra_end_ids) {
    if (id >= 0 && id < index->n_vocab) index->end_of_generation[id] = 1;
  }
  for (int32_t id = 0; id < index->n_vocab; ++id) {
    const auto type = tok.token_type(id);
    const bool text = type == tokenizer::TokenType::kNormal ||
                      type == tokenizer::TokenType::kByte ||
                      (options.user_defined && type == tokenizer::TokenType::kUserDefined);
    if (index->end_of_generation[id] || !text) continue;
    index->bytes[id] = tok.piece(id);
    index->plain_chars[id] = index->bytes[id].empty() ? -1 : plain_char_count(index->bytes[id]);
    index->has_angle[id] = index->bytes[id].find('<') != std::string::npos;
    index->max_bytes = std::max(index->max_bytes, index->bytes[id].size());
  }
  index->all = make_walk(*index, [](const TokenIndex&, int32_t) { return true; });
  index->not_plain =
      make_walk(*index, [](const TokenIndex& x, int32_t id) { return x.plain_chars[id] < 0; });
  index->with_angle =
      make_walk(*index, [](const TokenIndex& x, int32_t id) { return x.has_angle[id] != 0; });
  index->not_plain_or_angle = make_walk(*index, [](const TokenIndex& x, int32_t id) {
    return x.plain_chars[id] < 0 || x.has_angle[id];
  });
  return index;
}

}  // namespace

int32_t plain_char_count(std::string_view s) {
  int32_t count = 0;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    int extra;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b < 0x80) {
      if (b < 0x20 || b == '"' || b == '\\') return -1;
      extra = 0;
    } else if (b >= 0xC2 && b <= 0xDF) {
      extra = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      extra = 2;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      extra = 3;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return -1;
    }
    if (extra > 0 && i + extra >= s.size()) return -1;  // a character cut by the token's end
    for (int k = 1; k <= extra; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if (c < lo || c > hi) return -1;
      lo = 0x80;
      hi = 0xBF;
    }
    i += 1 + extra;
    ++count;
  }
  return count;
}

std::shared_ptr<const TokenIndex> shared_token_index(const tokenizer::Tokenizer& tok,
                                                     const TokenIndexOptions& options) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over everything the index is built from
  auto mix = [&h](std::string_view s) {
    for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    h = (h ^ 0xFF) * 1099511628211ull;
  };
  auto mix_id = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(tok.model_name());
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    mix(tok.token_text(id));
    mix_id(static_cast<uint64_t>(tok.token_type(id)));
  }
  for (int32_t id : tok.end_of_generation()) mix_id(static_cast<uint64_t>(id));
  mix_id(options.user_defined ? 0xA1 : 0xA0);
  for (int32_t id : options.extra_end_ids) mix_id(static_cast<uint64_t>(id) + 0x100000000ull);
  static std::mutex mutex;
  static std::map<uint64_t, std::weak_ptr<const TokenIndex>> cache;
  std::lock_guard lock(mutex);
  if (auto found = cache[h].lock()) return found;
  auto index = build_index(tok, options);
  cache[h] = index;
  return index;
}

}  // namespace sample
