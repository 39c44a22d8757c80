// Reading a tokenizer's vocabulary and special token ids from GGUF metadata.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <functional>

#include "util/log.h"

namespace tokenizer {
namespace {

// Reads an optional token id key. Absent, -1 and 0xFFFFFFFF mean "none"; an id past the end
// of the vocabulary is ignored with a warning, as llama.cpp does, so such files still load.
util::Result<int32_t> read_token_id(const gguf::File& file, std::string_view key, int32_t fallback,
                                    int32_t n_vocab) {
  const gguf::Value* v = file.find(key);
  if (!v) return fallback;
  auto id = v->as_i64();
  if (!id) {
    return util::errorf("{}: {} is a {}, not an integer token id; the file is malformed",
                        file.name(), key, gguf::value_type_name(v->type()));
  }
  if (*id == -1 || *id == 0xFFFFFFFF) return kNoToken;
  if (*id < 0 || *id >= n_vocab) {
    util::log_warn("{}: {} = {} is outside the vocabulary (0..{}), ignored", file.name(), key, *id,
                   n_vocab - 1);
    return kNoToken;
  }
  return static_cast<int32_t>(*id);
}

util::Result<bool> read_flag(const gguf::File& file, std::string_view key, bool fallback) {
  HR_ASSIGN_OR_RETURN(std::optional<bool> v, file.get_bool(key));
  return v.value_or(fallback);
}

}  // namespace

void Vocab::build_index() {
  size_t capacity = 16;
  while (capacity < 2 * types.size()) capacity *= 2;
  index_.assign(capacity, IndexSlot{});
  const size_t mask = capacity - 1;
  for (int32_t id = 0; id < size(); ++id) {
    const std::string_view t = text(id);
    const uint64_t h = std::hash<std::string_view>{}(t);
    size_t i = h & mask;
    while (index_[i].id != kNoToken && !(index_[i].hash == h && text(index_[i].id) == t)) {
      i = (i + 1) & mask;
    }
    index_[i] = {h, id};  // a duplicate text overwrites: the later id wins
  }
}

int32_t Vocab::find(std::string_view t) const {
  if (index_.empty()) return kNoToken;
  const uint64_t h = std::hash<std::string_view>{}(t);
  const size_t mask = index_.size() - 1;
  for (size_t i = h & mask; index_[i].id != kNoToken; i = (i + 1) & mask) {
    if (index_[i].hash == h && text(index_[i].id) == t) return index_[i].id;
  }
  return kNoToken;
}

int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    int digit = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                         : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

util::Result<Vocab> load_vocab(const gguf::File& file, ModelKind kind) {
  Vocab v;
  v.kind = kind;
  const gguf::Value* tokens = file.find("tokenizer.ggml.tokens");
  if (!tokens || !tokens->is_array() || tokens->array_type() != gguf::ValueType::kString) {
    return util::errorf(
        "{}: tokenizer.ggml.tokens is missing or not a string array; the file "
        "has no usable vocabulary",
        file.name());
  }
  const size_t n = tokens->array_size();
  if (n == 0 || n > static_cast<size_t>(INT32_MAX)) {
    return util::errorf("{}: tokenizer.ggml.tokens has {} entries; expected 1..{}", file.name(), n,
                        INT32_MAX);
  }
  size_t total = 0;
  for (std::string_view t : tokens->array_strings()) total += t.size();
  v.text_data.reserve(total);
  v.text_offsets.reserve(n + 1);
  for (std::string_view t : tokens->array_strings()) {
    v.text_offsets.push_back(static_cast<uint32_t>(v.text_data.size()));
    v.text_data.append(t);
    v.max_token_bytes = std::max(v.max_token_bytes, t.size());
  }
  v.text_offsets.push_back(static_cast<uint32_t>(v.text_data.size()));

  v.types.assign(n, TokenType::kNormal);
  if (const gguf::Value* types = file.find("tokenizer.ggml.token_type")) {
    auto values = types->array_as<int32_t>();
    if (!values || values->size() != n) {
      return util::errorf(
          "{}: tokenizer.ggml.token_type must be an integer array of {} entries "
          "(one per token); the file is malformed",
          file.name(), n);
    }
    for (size_t i = 0; i < n; ++i) {
      int32_t t = (*values)[i];
      v.types[i] = t >= 0 && t <= 6 ? static_cast<TokenType>(t) : TokenType::kUndefined;
    }
  }
  v.scores.assign(n, 0.0f);
  if (const gguf::Value* scores = file.find("tokenizer.ggml.scores")) {
    auto values = scores->array_as<float>();
    if (!values || values->size() != n) {
      return util::errorf(
          "{}: tokenizer.ggml.scores must be a number array of {} entries (one "
          "per token); the file is malformed",
          file.name(), n);
    }
    v.scores = std::move(*values);
  }

  v.build_index();
  v.byte_tokens.fill(kNoToken);
  for (int32_t id = 0; id < static_cast<int32_t>(n); ++id) {
    if (v.types[id] == TokenType::kByte) {
      int byte = parse_byte_token(v.text(id));
      if (byte >= 0) v.byte_tokens[byte] = id;
    }
  }

  // Defaults when a key is absent follow llama.cpp: SentencePiece files predate the special-id
  // keys (stories260K has no add_bos_token), WordPiece has fixed BERT ids.
  const int32_t vocab_size = static_cast<int32_t>(n);
  int32_t default_bos = kNoToken, default_eos = kNoToken, default_unk = kNoToken;
  bool default_add_bos = false, default_add_eos = false, default_space_prefix = false;
  switch (kind) {
    case ModelKind::kSpm:
      default_bos = 1, default_eos = 2, default_unk = 0;
      default_add_bos = true, default_space_prefix = true;
      break;
    case ModelKind::kWpm:
      default_bos = 101, default_eos = 102, default_unk = 100;
      default_add_bos = true, default_add_eos = true;
      break;
    case ModelKind::kGemma4:
      default_add_bos = true;
      break;
    case ModelKind::kBpe:
      break;
  }
  auto clamp = [&](int32_t id) { return id < vocab_size ? id : kNoToken; };
  if (kind == ModelKind::kWpm) {
    // BERT wraps text as [CLS] ... [SEP]; converters store them as cls/seperator (sic) ids.
    HR_ASSIGN_OR_RETURN(int32_t cls, read_token_id(file, "tokenizer.ggml.cls_token_id",
                                                   clamp(default_bos), vocab_size));
    HR_ASSIGN_OR_RETURN(v.bos, read_token_id(file, "tokenizer.ggml.bos_token_id", cls, vocab_size));
    HR_ASSIGN_OR_RETURN(int32_t sep, read_token_id(file, "tokenizer.ggml.seperator_token_id",
                                                   clamp(default_eos), vocab_size));
    HR_ASSIGN_OR_RETURN(v.eos, read_token_id(file, "tokenizer.ggml.eos_token_id", sep, vocab_size));
  } else {
    HR_ASSIGN_OR_RETURN(
        v.bos, read_token_id(file, "tokenizer.ggml.bos_token_id", clamp(default_bos), vocab_size));
    HR_ASSIGN_OR_RETURN(
        v.eos, read_token_id(file, "tokenizer.ggml.eos_token_id", clamp(default_eos), vocab_size));
  }
  HR_ASSIGN_OR_RETURN(v.eot,
                      read_token_id(file, "tokenizer.ggml.eot_token_id", kNoToken, vocab_size));
  HR_ASSIGN_OR_RETURN(v.unk, read_token_id(file, "tokenizer.ggml.unknown_token_id",
                                           clamp(default_unk), vocab_size));
  HR_ASSIGN_OR_RETURN(v.pad,
                      read_token_id(file, "tokenizer.ggml.padding_token_id", kNoToken, vocab_size));
  HR_ASSIGN_OR_RETURN(v.add_bos, read_flag(file, "tokenizer.ggml.add_bos_token", default_add_bos));
  HR_ASSIGN_OR_RETURN(v.add_eos, read_flag(file, "tokenizer.ggml.add_eos_token", default_add_eos));
  HR_ASSIGN_OR_RETURN(v.add_space_prefix,
                      read_flag(file, "tokenizer.ggml.add_space_prefix", default_space_prefix));
  if (kind == ModelKind::kWpm) v.add_eos = v.add_bos;  // [SEP] closes whatever [CLS] opened
  return v;
}

}  // namespace tokenizer
