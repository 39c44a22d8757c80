// Matching special token texts in raw text with a byte trie.
#include "tokenizer/special_tokens.h"

namespace tokenizer {

SpecialTokens::SpecialTokens(const Vocab& vocab) {
  token_.push_back(kNoToken);
  always_.push_back(0);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    TokenType t = vocab.type(id);
    if (t != TokenType::kControl && t != TokenType::kUserDefined && t != TokenType::kUnknown) {
      continue;
    }
    std::string_view text = vocab.text(id);
    if (text.empty() || vocab.find(text) != id) continue;  // duplicate text: the later id wins
    add(text, id, t == TokenType::kUserDefined);
  }
}

void SpecialTokens::add(std::string_view text, int32_t id, bool always) {
  int32_t node = 0;
  for (unsigned char byte : text) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | byte;
    if (const int32_t* child = edges_.find(key)) {
      node = *child;
      continue;
    }
    int32_t child = static_cast<int32_t>(token_.size());
    token_.push_back(kNoToken);
    always_.push_back(0);
    edges_.insert(key, child);
    node = child;
  }
  token_[node] = id;
  always_[node] = always ? 1 : 0;
  first_byte_[static_cast<unsigned char>(text[0])] |= always ? 3 : 2;
}

std::vector<Fragment> SpecialTokens::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> out;
  const uint8_t wanted = parse_special ? 2 : 1;
  size_t plain = 0;
  for (size_t i = 0; i < text.size();) {
    if ((first_byte_[static_cast<unsigned char>(text[i])] & wanted) == 0) {
      ++i;
      continue;
    }
    int32_t best = kNoToken;
    size_t best_len = 0;
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      const int32_t* child =
          edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[j]));
      if (!child) break;
      node = *child;
      if (token_[node] != kNoToken && (parse_special || always_[node])) {
        best = token_[node];
        best_len = j + 1 - i;
      }
    }
    if (best == kNoToken) {
      ++i;
      continue;
    }
    if (plain < i) out.push_back({kNoToken, plain, i});
    out.push_back({best, i, i + best_len});
    i += best_len;
    plain = i;
  }
  if (plain < text.size()) out.push_back({kNoToken, plain, text.size()});
  return out;
}

}  // namespace tokenizer
