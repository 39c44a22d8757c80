// Hugging Face tokenizers to GGUF tokenizer metadata: SentencePiece models (a small protobuf
// reader), tokenizer.json BPE vocabularies, and the special tokens around them — following the
// choices of llama.cpp's converter (gguf-py's SpecialVocab, LlamaHfVocab, the SentencePiece
// vocab) so the files tokenize the same in every runtime.
#include "convert/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "util/mapped_file.h"

namespace convert {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// GGUF token types (tokenizer.ggml.token_type), the same numbers SentencePiece uses.
enum TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::vector<std::string> merges;

  void push(std::string text, float score, int32_t type) {
    tokens.push_back(std::move(text));
    scores.push_back(score);
    types.push_back(type);
  }
};

util::Result<Json> read_json(const fs::path& path) {
  HR_ASSIGN_OR_RETURN(util::MappedFile file, util::MappedFile::open(path.string()));
  Json j = Json::parse(file.bytes().begin(), file.bytes().end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return util::errorf("convert: {} is not a JSON object — damaged download?", path.string());
  }
  return j;
}

// An optional JSON file of the checkpoint (null when absent).
util::Result<Json> read_optional_json(const fs::path& path) {
  if (!fs::exists(path)) return Json();
  return read_json(path);
}

bool is_byte_token(std::string_view t) {
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  return t.size() == 6 && t.substr(0, 3) == "<0x" && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

// Added tokens some models forget to flag special (llama.cpp's list).
bool looks_special(std::string_view t) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.substr(0, open.size()) == open &&
           t.substr(t.size() - close.size()) == close;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<｜", "｜>") || wrapped("<unused", ">");
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t at = 0;;) {
    const size_t hit = s.find(from, at);
    out.append(s.substr(at, hit == std::string_view::npos ? std::string_view::npos : hit - at));
    if (hit == std::string_view::npos) return out;
    out.append(to);
    at = hit + from.size();
  }
}

// --- SentencePiece (tokenizer.model) -------------------------------------------------------

// The few protobuf wire-format pieces a SentencePiece ModelProto needs.
class ProtoReader {
 public:
  explicit ProtoReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  bool done() const { return at_ >= bytes_.size(); }
  bool varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && at_ < bytes_.size(); shift += 7) {
      const uint8_t b = bytes_[at_++];
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Reads a field header; wire type 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
  bool field(uint32_t* number, uint32_t* wire) {
    uint64_t key;
    if (!varint(&key)) return false;
    *number = static_cast<uint32_t>(key >> 3);
    *wire = static_cast<uint32_t>(key & 7);
    return true;
  }
  bool bytes(std::span<const uint8_t>* out) {
    uint64_t n;
    if (!varint(&n) || n > bytes_.size() - at_) return false;
    *out = bytes_.subspan(at_, n);
    at_ += n;
    return true;
  }
  bool fixed32(uint32_t* v) {
    if (bytes_.size() - at_ < 4) return false;
    std::memcpy(v, bytes_.data() + at_, 4);
    at_ += 4;
    return true;
  }
  bool skip(uint32_t wire) {
    uint64_t v;
    std::span<const uint8_t> s;
    uint32_t f;
    switch (wire) {
      case 0:
        return varint(&v);
      case 1:
        if (bytes_.size() - at_ < 8) return false;
        at_ += 8;
        return true;
      case 2:
        return bytes(&s);
      case 5:
        return fixed32(&f);
      default:
        return false;
    }
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

// One SentencePiece: piece = 1 (string), score = 2 (float), type = 3 (enum, default NORMAL).
bool read_piece(std::span<const uint8_t> bytes, Vocab& v) {
  ProtoReader r(bytes);
  std::string piece;
  float score = 0;
  uint64_t type = kNormal;
  while (!r.done()) {
    uint32_t number, wire;
    if (!r.field(&number, &wire)) return false;
    if (number == 1 && wire == 2) {
      std::span<const uint8_t> s;
      if (!r.bytes(&s)) return false;
      piece.assign(reinterpret_cast<const char*>(s.data()), s.size());
    } else if (number == 2 && wire == 5) {
      uint32_t bits;
      if (!r.fixed32(&bits)) return false;
      std::memcpy(&score, &bits, 4);
    } else if (number == 3 && wire == 0) {
      if (!r.varint(&type)) return false;
    } else if (!r.skip(wire)) {
      return false;
    }
  }
  // llama.cpp keeps unknown, control, unused and byte pieces; everything else is normal.
  const int32_t t = type == kUnknown || type == kControl || type == kUnused || type == kByte
                        ? static_cast<int32_t>(type)
                        : kNormal;
  v.push(std::move(piece), score, t);
  return true;
}

util::Result<Vocab> read_sentencepiece(const fs::path& path) {
  HR_ASSIGN_OR_RETURN(util::MappedFile file, util::MappedFile::open(path.string()));
  ProtoReader r(file.bytes());
  Vocab v;
  while (!r.done()) {
    uint32_t number, wire;
    std::span<const uint8_t> piece;
    const bool ok =
        r.field(&number, &wire) &&
        (number == 1 && wire == 2 ? r.bytes(&piece) && read_piece(piece, v) : r.skip(wire));
    if (!ok) {
      return util::errorf(
          "convert: {} is not a SentencePiece model (bad protobuf after {} "
          "pieces) — damaged download?",
          path.string(), v.tokens.size());
    }
  }
  if (v.tokens.empty()) return util::errorf("convert: {} holds no pieces", path.string());
  return v;
}

// --- tokenizer.json -------------------------------------------------------------------------

struct AddedToken {
  int64_t id;
  std::string content;
  bool special;
};

std::vector<AddedToken> added_tokens(const Json& tokenizer) {
  std::vector<AddedToken> out;
  if (!tokenizer.contains("added_tokens") || !tokenizer["added_tokens"].is_array()) return out;
  for (const Json& t : tokenizer["added_tokens"]) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string()) {
      continue;
    }
    out.push_back(
        {t["id"].get<int64_t>(), t["content"].get<std::string>(), t.value("special", false)});
  }
  return out;
}

// The BPE model's vocabulary by id (tokens plus added tokens), [PADn] for ids nobody names.
util::Result<std::vector<std::string>> tokens_by_id(const Json& tokenizer,
                                                    const std::vector<AddedToken>& added,
                                                    int64_t min_size, const std::string& file) {
  const Json& vocab = tokenizer["model"]["vocab"];
  int64_t n = min_size;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return util::errorf("convert: {}: vocabulary entry '{}' has no valid id", file, it.key());
    }
    n = std::max(n, it->get<int64_t>() + 1);
  }
  for (const AddedToken& a : added) n = std::max(n, a.id + 1);
  if (n > (int64_t{1} << 24))
    return util::errorf("convert: {}: {} tokens is not a vocabulary", file, n);
  std::vector<std::string> out(static_cast<size_t>(n));
  std::vector<bool> named(out.size(), false);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    out[static_cast<size_t>(it->get<int64_t>())] = it.key();
    named[static_cast<size_t>(it->get<int64_t>())] = true;
  }
  for (const AddedToken& a : added) {
    if (a.id < 0) continue;
    out[static_cast<size_t>(a.id)] = a.content;
    named[static_cast<size_t>(a.id)] = true;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!named[i]) out[i] = "[PAD" + std::to_string(i) + "]";
  }
  return out;
}

// Merges as "left right"; the list-of-pairs form (transformers ≥ 4.45) writes spaces inside a
// part as U+0120, as llama.cpp does.
util::Result<std::vector<std::string>> read_merges(const Json& tokenizer, const std::string& file) {
  std::vector<std::string> out;
  const Json& merges =
      tokenizer["model"].contains("merges") ? tokenizer["model"]["merges"] : Json();
  if (!merges.is_array()) return out;
  out.reserve(merges.size());
  for (const Json& m : merges) {
    if (m.is_string()) {
      out.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.push_back(replace_all(m[0].get<std::string>(), " ", "\u0120") + " " +
                    replace_all(m[1].get<std::string>(), " ", "\u0120"));
    } else {
      return util::errorf("convert: {}: a merge is neither \"a b\" nor [\"a\", \"b\"]", file);
    }
  }
  return out;
}

// Pre-tokenizer regexes of the byte-level BPE vocabularies headroom converts, by llama.cpp name.
constexpr std::string_view kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Which of llama.cpp's pre-tokenizers a tokenizer.json uses, from its pre_tokenizer section
// (llama.cpp's converter hashes the tokenization of a test string; without the Python tokenizer
// the regex is the evidence).
util::Result<std::string> byte_level_pre(const Json& tokenizer, const std::string& file) {
  std::vector<std::string> regexes;
  bool byte_level_default_regex = false;
  std::function<void(const Json&)> walk = [&](const Json& p) {
    if (!p.is_object()) return;
    const std::string type = p.value("type", "");
    if (type == "Sequence" && p.contains("pretokenizers")) {
      for (const Json& q : p["pretokenizers"]) walk(q);
    } else if (type == "Split" && p.contains("pattern") && p["pattern"].contains("Regex")) {
      regexes.push_back(p["pattern"]["Regex"].get<std::string>());
    } else if (type == "ByteLevel" && p.value("use_regex", true)) {
      byte_level_default_regex = true;
    }
  };
  if (tokenizer.contains("pre_tokenizer")) walk(tokenizer["pre_tokenizer"]);
  if (regexes.size() == 1 && regexes[0] == kLlama3Regex) return std::string("llama-bpe");
  if ((regexes.empty() && byte_level_default_regex) ||
      (regexes.size() == 1 && regexes[0] == kGpt2Regex)) {
    return std::string("gpt-2");
  }
  return util::errorf(
      "convert: {}: unsupported pre-tokenizer (supported: the GPT-2 and Llama 3 "
      "byte-level splits) — this model's tokenizer cannot be converted yet",
      file);
}

// --- special tokens (gguf-py's SpecialVocab) ----------------------------------------------------

struct SpecialTokens {
  std::map<std::string, int64_t> ids;  // "bos" → id
  std::map<std::string, bool> add;     // "bos" → add_bos_token
  std::optional<std::string> chat_template;
};

constexpr std::string_view kSpecialKinds[] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};

std::string_view gguf_id_key(std::string_view kind) {
  if (kind == "bos") return "tokenizer.ggml.bos_token_id";
  if (kind == "eos") return "tokenizer.ggml.eos_token_id";
  if (kind == "unk") return "tokenizer.ggml.unknown_token_id";
  if (kind == "sep") return "tokenizer.ggml.seperator_token_id";  // sic: the ecosystem's spelling
  if (kind == "pad") return "tokenizer.ggml.padding_token_id";
  if (kind == "cls") return "tokenizer.ggml.cls_token_id";
  return "tokenizer.ggml.mask_token_id";
}

util::Result<SpecialTokens> special_tokens(const fs::path& dir, const Json& tokenizer,
                                           int64_t n_tokens) {
  SpecialTokens s;
  HR_ASSIGN_OR_RETURN(Json config, read_optional_json(dir / "tokenizer_config.json"));
  auto set_id = [&](std::string_view kind, std::optional<int64_t> id) {
    if (id && *id >= 0 && *id < n_tokens) s.ids.emplace(std::string(kind), *id);
  };
  // A template that starts with BOS adds it.
  if (tokenizer.is_object() && tokenizer.contains("post_processor") &&
      tokenizer["post_processor"].is_object()) {
    const Json& pp = tokenizer["post_processor"];
    if (pp.value("type", "") == "TemplateProcessing" && pp.contains("single") &&
        pp["single"].is_array() && pp["single"].size() > 1) {
      const Json& first = pp["single"][0];
      const Json& last = pp["single"].back();
      s.add["bos"] = first.contains("SpecialToken");
      s.add["eos"] = last.contains("SpecialToken");
    }
  }
  if (config.is_object()) {
    const std::vector<AddedToken> added = added_tokens(tokenizer);
    for (std::string_view kind : kSpecialKinds) {
      const std::string k(kind);
      if (config.contains("add_" + k + "_token") && config["add_" + k + "_token"].is_boolean()) {
        s.add[k] = config["add_" + k + "_token"].get<bool>();
      }
      const Json* entry = config.contains(k + "_token") ? &config[k + "_token"] : nullptr;
      std::string content;
      if (entry && entry->is_string()) content = entry->get<std::string>();
      if (entry && entry->is_object() && entry->contains("content") &&
          (*entry)["content"].is_string()) {
        content = (*entry)["content"].get<std::string>();
      }
      if (content.empty()) continue;
      for (const AddedToken& a : added) {
        if (a.content == content) {
          set_id(kind, a.id);
          break;
        }
      }
    }
    if (config.contains("chat_template") && config["chat_template"].is_string()) {
      s.chat_template = config["chat_template"].get<std::string>();
    }
  }
  if (!s.chat_template && fs::exists(dir / "chat_template.jinja")) {
    HR_ASSIGN_OR_RETURN(util::MappedFile t,
                        util::MappedFile::open((dir / "chat_template.jinja").string()));
    s.chat_template = std::string(reinterpret_cast<const char*>(t.bytes().data()), t.size());
  }
  // config.json fills the ids tokenizer_config did not name.
  HR_ASSIGN_OR_RETURN(Json model_config, read_optional_json(dir / "config.json"));
  const Json* text_config =
      model_config.contains("text_config") ? &model_config["text_config"] : nullptr;
  for (std::string_view kind : kSpecialKinds) {
    const std::string key = std::string(kind) + "_token_id";
    for (const Json* c : {static_cast<const Json*>(&model_config), text_config}) {
      if (c && c->is_object() && c->contains(key) && (*c)[key].is_number_integer() &&
          !s.ids.contains(std::string(kind))) {
        set_id(kind, (*c)[key].get<int64_t>());
      }
    }
  }
  return s;
}

void write_vocab(gguf::Writer& w, const std::string& model, const std::string& pre, Vocab v,
                 const SpecialTokens& special) {
  w.set("tokenizer.ggml.model", gguf::MetaValue::string(model));
  if (!pre.empty()) w.set("tokenizer.ggml.pre", gguf::MetaValue::string(pre));
  w.set("tokenizer.ggml.tokens", gguf::MetaValue::array_strings(std::move(v.tokens)));
  if (!v.scores.empty()) w.set("tokenizer.ggml.scores", gguf::MetaValue::array_f32(v.scores));
  w.set("tokenizer.ggml.token_type", gguf::MetaValue::array_i32(v.types));
  if (!v.merges.empty()) {
    w.set("tokenizer.ggml.merges", gguf::MetaValue::array_strings(std::move(v.merges)));
  }
  for (const auto& [kind, id] : special.ids) {
    w.set(std::string(gguf_id_key(kind)), gguf::MetaValue::u32(static_cast<uint32_t>(id)));
  }
  for (const auto& [kind, add] : special.add) {
    w.set("tokenizer.ggml.add_" + kind + "_token", gguf::MetaValue::boolean(add));
  }
  if (special.chat_template) {
    w.set("tokenizer.chat_template", gguf::MetaValue::string(*special.chat_template));
  }
}

// --- the three vocabulary kinds ----------------------------------------------------------------

// SentencePiece: the model's pieces, then added_tokens.json and tokenizer_config's
// added_tokens_decoder, padded to the model's vocabulary size.
util::Result<VocabInfo> add_sentencepiece(gguf::Writer& w, const fs::path& dir, int64_t n_vocab) {
  HR_ASSIGN_OR_RETURN(Vocab v, read_sentencepiece(dir / "tokenizer.model"));
  const int64_t size = n_vocab > 0 ? n_vocab : static_cast<int64_t>(v.tokens.size());
  if (static_cast<int64_t>(v.tokens.size()) > size) {
    v.tokens.resize(static_cast<size_t>(size));
    v.scores.resize(static_cast<size_t>(size));
    v.types.resize(static_cast<size_t>(size));
  }
  for (int64_t i = static_cast<int64_t>(v.tokens.size()); i < size; ++i) {
    v.push("[PAD" + std::to_string(i) + "]", -10000.0f, kUnused);
  }
  HR_ASSIGN_OR_RETURN(Json added, read_optional_json(dir / "added_tokens.json"));
  for (auto it = added.begin(); added.is_object() && it != added.end(); ++it) {
    if (!it->is_number_integer()) continue;
    const int64_t id = it->get<int64_t>();
    if (id < 0 || id >= size) continue;
    v.tokens[static_cast<size_t>(id)] = it.key();
    v.scores[static_cast<size_t>(id)] = -1000.0f;
    v.types[static_cast<size_t>(id)] = kUserDefined;
  }
  HR_ASSIGN_OR_RETURN(Json config, read_optional_json(dir / "tokenizer_config.json"));
  if (config.is_object() && config.contains("added_tokens_decoder") &&
      config["added_tokens_decoder"].is_object()) {
    for (auto it = config["added_tokens_decoder"].begin();
         it != config["added_tokens_decoder"].end(); ++it) {
      const int64_t id = std::strtoll(it.key().c_str(), nullptr, 10);
      if (id < 0 || id >= size || !it->contains("content") || !(*it)["content"].is_string())
        continue;
      std::string content = (*it)["content"].get<std::string>();
      const bool special = it->value("special", false) || looks_special(content);
      if (!special) content = replace_all(content, "\u2581", " ");
      v.tokens[static_cast<size_t>(id)] = content;
      v.scores[static_cast<size_t>(id)] = -1000.0f;
      v.types[static_cast<size_t>(id)] = special ? kControl : kUserDefined;
    }
  }
  if (config.is_object() && config.contains("add_prefix_space") &&
      config["add_prefix_space"].is_boolean()) {
    w.set("tokenizer.ggml.add_space_prefix",
          gguf::MetaValue::boolean(config["add_prefix_space"].get<bool>()));
  }
  HR_ASSIGN_OR_RETURN(SpecialTokens special, special_tokens(dir, Json(), size));
  const int64_t n = static_cast<int64_t>(v.tokens.size());
  write_vocab(w, "llama", "default", std::move(v), special);
  return VocabInfo{n, "llama"};
}

// A BPE tokenizer.json with byte fallback (LlamaHfVocab): ids in order, added tokens at their
// ids; BYTE for <0xXX>, CONTROL for added tokens flagged special, NORMAL otherwise. Scores are
// all -1000, as llama.cpp writes them.
Vocab byte_fallback_vocab(const std::vector<std::string>& by_id,
                          const std::vector<AddedToken>& added) {
  std::vector<int32_t> types(by_id.size(), kNormal);
  for (size_t i = 0; i < by_id.size(); ++i) {
    if (is_byte_token(by_id[i])) types[i] = kByte;
    if (by_id[i].starts_with("[PAD")) types[i] = kUnused;
  }
  for (const AddedToken& a : added) {
    if (a.special) types[static_cast<size_t>(a.id)] = kControl;
  }
  Vocab v;
  for (size_t i = 0; i < by_id.size(); ++i) v.push(by_id[i], -1000.0f, types[i]);
  return v;
}

util::Result<VocabInfo> add_tokenizer_json(gguf::Writer& w, const fs::path& dir, VocabStyle style,
                                           int64_t n_vocab) {
  const fs::path path = dir / "tokenizer.json";
  HR_ASSIGN_OR_RETURN(Json tokenizer, read_json(path));
  if (!tokenizer.contains("model") || !tokenizer["model"].is_object() ||
      tokenizer["model"].value("type", "") != "BPE" || !tokenizer["model"].contains("vocab") ||
      !tokenizer["model"]["vocab"].is_object()) {
    return util::errorf(
        "convert: {}: not a BPE tokenizer (model.type {}) — headroom converts BPE "
        "and SentencePiece vocabularies",
        path.string(), tokenizer.contains("model") ? tokenizer["model"].value("type", "?") : "?");
  }
  const std::vector<AddedToken> added = added_tokens(tokenizer);
  const bool byte_fallback = tokenizer["model"].value("byte_fallback", false);
  HR_ASSIGN_OR_RETURN(std::vector<std::string> by_id,
                      tokens_by_id(tokenizer, added, byte_fallback ? 0 : n_vocab, path.string()));
  const int64_t n = static_cast<int64_t>(by_id.size());
  HR_ASSIGN_OR_RETURN(SpecialTokens special, special_tokens(dir, tokenizer, n));
  if (style == VocabStyle::kGemma4) {
    if (!byte_fallback) {
      return util::errorf("convert: {}: a Gemma 4 vocabulary has byte fallback; this one does not",
                          path.string());
    }
    Vocab v = byte_fallback_vocab(by_id, added);
    // Rendered as text on decode so the chat parser can read them (llama.cpp does the same).
    static constexpr std::string_view kVisible[] = {
        "<|channel>",       "<channel|>",       "<|tool_call>", "<tool_call|>",
        "<|tool_response>", "<tool_response|>", "<|\"|>"};
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      for (std::string_view t : kVisible) {
        if (v.tokens[i] == t) v.types[i] = kUserDefined;
      }
    }
    HR_ASSIGN_OR_RETURN(v.merges, read_merges(tokenizer, path.string()));
    if (v.merges.empty())
      return util::errorf("convert: {}: no merges — the vocabulary is incomplete", path.string());
    special.add["bos"] = true;
    write_vocab(w, "gemma4", "", std::move(v), special);
    w.set("tokenizer.ggml.add_space_prefix", gguf::MetaValue::boolean(false));
    return VocabInfo{n, "gemma4"};
  }
  if (byte_fallback) {  // a SentencePiece-style vocabulary shipped as tokenizer.json
    write_vocab(w, "llama", "default", byte_fallback_vocab(by_id, added), special);
    return VocabInfo{n, "llama"};
  }
  HR_ASSIGN_OR_RETURN(std::string pre, byte_level_pre(tokenizer, path.string()));
  Vocab v;
  std::map<int64_t, const AddedToken*> added_by_id;
  for (const AddedToken& a : added) added_by_id[a.id] = &a;
  for (int64_t i = 0; i < n; ++i) {
    auto it = added_by_id.find(i);
    int32_t type = by_id[static_cast<size_t>(i)].starts_with("[PAD") ? kUnused : kNormal;
    if (it != added_by_id.end()) {
      type = it->second->special || looks_special(it->second->content) ? kControl : kUserDefined;
    }
    v.tokens.push_back(by_id[static_cast<size_t>(i)]);
    v.types.push_back(type);
  }
  HR_ASSIGN_OR_RETURN(v.merges, read_merges(tokenizer, path.string()));
  write_vocab(w, "gpt2", pre, std::move(v), special);
  return VocabInfo{n, "gpt2"};
}

}  // namespace

util::Result<VocabInfo> add_hf_tokenizer(gguf::Writer& writer, const std::string& dir,
                                         VocabStyle style, int64_t n_vocab) {
  const fs::path root(dir);
  if (style == VocabStyle::kLlama && fs::exists(root / "tokenizer.model")) {
    return add_sentencepiece(writer, root, n_vocab);
  }
  if (fs::exists(root / "tokenizer.json")) return add_tokenizer_json(writer, root, style, n_vocab);
  return util::errorf(
      "convert: {} has no tokenizer.json{} — copy the tokenizer files next to the "
      "weights",
      dir, style == VocabStyle::kLlama ? " or tokenizer.model" : "");
}

}  // namespace convert
