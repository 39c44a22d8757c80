// Structured output: response_format → grammar → per-step token masks.
//
// The vocabulary is indexed once: every token's bytes (control, user-defined and unused tokens
// never appear inside JSON), sorted so that tokens sharing a prefix are neighbours. A mask walks
// that list feeding bytes to the grammar, reusing the state of the shared prefix and skipping
// every token under a prefix the grammar refused. Inside an unconstrained string, tokens made of
// whole plain characters are decided by their length alone, and only the rest is walked.
#include "sample/constraint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "sample/json_schema.h"

namespace sample {
namespace {

struct TokenWalk {
  std::vector<int32_t> ids;    // sorted by bytes
  std::vector<uint32_t> lcp;   // common prefix length with the previous entry
};

struct TokenIndex {
  int32_t n_vocab = 0;
  size_t max_bytes = 0;
  std::vector<std::string> bytes;     // empty: never allowed inside the document
  std::vector<int32_t> plain_chars;   // code points when the token is whole plain characters, else -1
  std::vector<uint8_t> end_of_generation;
  TokenWalk all, not_plain;
};

// Code points of `s` when it is valid UTF-8 with no " \ or control character; -1 otherwise.
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

TokenWalk make_walk(const TokenIndex& index, bool (*keep)(const TokenIndex&, int32_t)) {
  TokenWalk w;
  for (int32_t id = 0; id < index.n_vocab; ++id) {
    if (!index.bytes[id].empty() && keep(index, id)) w.ids.push_back(id);
  }
  std::sort(w.ids.begin(), w.ids.end(), [&](int32_t a, int32_t b) { return index.bytes[a] < index.bytes[b]; });
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

std::shared_ptr<const TokenIndex> build_index(const tokenizer::Tokenizer& tok) {
  auto index = std::make_shared<TokenIndex>();
  index->n_vocab = tok.n_vocab();
  index->bytes.resize(index->n_vocab);
  index->plain_chars.assign(index->n_vocab, -1);
  index->end_of_generation.assign(index->n_vocab, 0);
  for (int32_t id : tok.end_of_generation()) {
    if (id >= 0 && id < index->n_vocab) index->end_of_generation[id] = 1;
  }
  for (int32_t id = 0; id < index->n_vocab; ++id) {
    const auto type = tok.token_type(id);
    if (index->end_of_generation[id] || (type != tokenizer::TokenType::kNormal && type != tokenizer::TokenType::kByte))
      continue;
    index->bytes[id] = tok.piece(id);
    index->plain_chars[id] = index->bytes[id].empty() ? -1 : plain_char_count(index->bytes[id]);
    index->max_bytes = std::max(index->max_bytes, index->bytes[id].size());
  }
  index->all = make_walk(*index, [](const TokenIndex&, int32_t) { return true; });
  index->not_plain = make_walk(*index, [](const TokenIndex& x, int32_t id) { return x.plain_chars[id] < 0; });
  return index;
}

// One index per vocabulary, shared by every constraint compiled for it while any is alive.
std::shared_ptr<const TokenIndex> shared_index(const tokenizer::Tokenizer& tok) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s) {
    for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    h = (h ^ 0xFF) * 1099511628211ull;
  };
  mix(tok.model_name());
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    mix(tok.token_text(id));
    h = (h ^ static_cast<uint64_t>(tok.token_type(id))) * 1099511628211ull;
  }
  for (int32_t id : tok.end_of_generation()) h = (h ^ static_cast<uint64_t>(id)) * 1099511628211ull;
  static std::mutex mutex;
  static std::map<uint64_t, std::weak_ptr<const TokenIndex>> cache;
  std::lock_guard lock(mutex);
  if (auto found = cache[h].lock()) return found;
  auto index = build_index(tok);
  cache[h] = index;
  return index;
}

class JsonConstraint final : public Constraint {
 public:
  JsonConstraint(std::unique_ptr<Grammar> grammar, std::shared_ptr<const TokenIndex> index)
      : grammar_(std::move(grammar)), index_(std::move(index)), initial_(grammar_.get()), state_(initial_) {
    levels_.assign(index_->max_bytes + 1, GrammarState(grammar_.get()));
  }

  void mask(std::span<float> logits, std::span<const int32_t> generated) override {
    advance(generated);
    allowed_.assign(logits.size(), 0);
    const bool stuck = ended_ || broken_ || state_.dead();
    if (!stuck) compute_allowed();
    if (stuck || state_.complete()) {
      for (int32_t id = 0; id < index_->n_vocab && id < static_cast<int32_t>(logits.size()); ++id) {
        if (index_->end_of_generation[id]) allowed_[id] = 1;
      }
    }
    constexpr float kNever = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!allowed_[i]) logits[i] = kNever;
    }
  }

  bool complete(std::span<const int32_t> generated) override {
    advance(generated);
    return !broken_ && !state_.dead() && state_.complete();
  }

 private:
  void advance(std::span<const int32_t> generated) {
    if (generated.size() < consumed_.size() || !std::equal(consumed_.begin(), consumed_.end(), generated.begin())) {
      state_.assign(initial_);
      consumed_.clear();
      ended_ = broken_ = false;
    }
    for (size_t i = consumed_.size(); i < generated.size(); ++i) {
      const int32_t id = generated[i];
      consumed_.push_back(id);
      if (ended_ || broken_) continue;
      if (id >= 0 && id < index_->n_vocab && index_->end_of_generation[id]) {
        ended_ = true;
      } else if (id < 0 || id >= index_->n_vocab || index_->bytes[id].empty() || !state_.feed(index_->bytes[id])) {
        broken_ = true;  // a token the mask did not allow was forced in: only ending remains
      }
    }
  }

  void compute_allowed() {
    const int64_t budget = state_.plain_string_budget();
    const TokenWalk* walk = &index_->all;
    if (budget >= 0) {
      for (int32_t id = 0; id < index_->n_vocab; ++id) {
        const int32_t chars = index_->plain_chars[id];
        if (chars > 0 && chars <= budget) allowed_[id] = 1;
      }
      walk = &index_->not_plain;
    }
    levels_[0].assign(state_);
    size_t valid = 0;  // levels_[0..valid] hold the states after the previous token's prefix
    size_t dead_depth = SIZE_MAX;
    for (size_t i = 0; i < walk->ids.size(); ++i) {
      const size_t common = walk->lcp[i];
      if (common >= dead_depth) continue;  // under a prefix the grammar already refused
      dead_depth = SIZE_MAX;
      const int32_t id = walk->ids[i];
      const std::string& bytes = index_->bytes[id];
      size_t depth = std::min(common, valid);
      for (; depth < bytes.size(); ++depth) {
        if (!levels_[depth + 1].feed_from(levels_[depth], static_cast<uint8_t>(bytes[depth]))) {
          dead_depth = depth + 1;
          break;
        }
      }
      valid = depth;
      if (depth == bytes.size()) allowed_[id] = 1;
    }
  }

  std::unique_ptr<Grammar> grammar_;
  std::shared_ptr<const TokenIndex> index_;
  GrammarState initial_, state_;
  std::vector<GrammarState> levels_;
  std::vector<int32_t> consumed_;
  std::vector<uint8_t> allowed_;
  bool ended_ = false, broken_ = false;
};

util::Result<Grammar> grammar_for(const nlohmann::ordered_json& rf) {
  if (!rf.is_object()) return util::errorf("must be an object like {{\"type\":\"json_object\"}}");
  if (!rf.contains("type") || !rf["type"].is_string())
    return util::errorf("'type' must be \"text\", \"json_object\" or \"json_schema\"");
  const auto type = rf["type"].get<std::string>();
  if (type == "json_object") return any_json_object_grammar();
  if (type != "json_schema")
    return util::errorf("type '{}' is not supported (use \"text\", \"json_object\" or \"json_schema\")", type);
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
    return util::errorf("json_schema must be an object with a 'schema'");
  const auto& js = rf["json_schema"];
  if (!js.contains("schema")) return util::errorf("json_schema.schema is missing");
  return compile_json_schema(js["schema"]);
}

}  // namespace

util::Result<std::unique_ptr<Constraint>> compile_response_format(const nlohmann::ordered_json& response_format,
                                                                   const tokenizer::Tokenizer& tokenizer) {
  if (response_format.is_object() && response_format.contains("type") && response_format["type"] == "text") {
    return std::unique_ptr<Constraint>();
  }
  auto grammar = grammar_for(response_format);
  if (!grammar) return grammar.error().with_context("response_format");
  return std::unique_ptr<Constraint>(
      std::make_unique<JsonConstraint>(std::make_unique<Grammar>(std::move(*grammar)), shared_index(tokenizer)));
}

util::Result<std::unique_ptr<Constraint>> compile_response_format(const nlohmann::json& response_format,
                                                                   const tokenizer::Tokenizer& tokenizer) {
  nlohmann::ordered_json ordered;
  try {
    ordered = nlohmann::ordered_json::parse(response_format.dump());
  } catch (const nlohmann::json::exception&) {
    return util::errorf("response_format: a string in it is not valid UTF-8");
  }
  return compile_response_format(ordered, tokenizer);
}

}  // namespace sample
