// Vocab: the token table of a GGUF file (texts, types, scores) and its special token ids.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/file.h"
#include "util/result.h"

namespace tokenizer {

// tokenizer.ggml.token_type values, numbered as llama.cpp writes them.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// The tokenizer algorithms a GGUF file can name in tokenizer.ggml.model.
enum class ModelKind {
  kSpm,     // "llama": SentencePiece BPE by piece scores, byte fallback
  kBpe,     // "gpt2": byte-level BPE by merge rank, regex pre-tokenizer
  kGemma4,  // "gemma4": BPE by merge rank over UTF-8 characters, spaces as ▁, byte fallback
  kWpm,     // "bert": WordPiece, longest match first
};

constexpr int32_t kNoToken = -1;

struct Vocab {
  ModelKind kind = ModelKind::kSpm;
  std::string text_data;               // all token texts back to back
  std::vector<uint32_t> text_offsets;  // token i is text_data[offsets[i], offsets[i + 1])
  std::vector<TokenType> types;
  std::vector<float> scores;             // all 0 when the file has none
  std::array<int32_t, 256> byte_tokens;  // the <0xXX> token of each byte, or kNoToken
  size_t max_token_bytes = 0;

  // Special ids from the file (kNoToken when absent). For WordPiece, bos is [CLS] and eos [SEP].
  int32_t bos = kNoToken;
  int32_t eos = kNoToken;
  int32_t eot = kNoToken;
  int32_t unk = kNoToken;
  int32_t pad = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;

  int32_t size() const { return static_cast<int32_t>(types.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < size(); }
  std::string_view text(int32_t id) const {
    return std::string_view(text_data).substr(text_offsets[id],
                                              text_offsets[id + 1] - text_offsets[id]);
  }
  TokenType type(int32_t id) const { return types[id]; }
  // The id of a token text, or kNoToken. On duplicate texts the later id wins, as in llama.cpp.
  int32_t find(std::string_view text) const;
  // Builds the text index find() uses; call once after filling the texts.
  void build_index();

 private:
  // Open addressing over (hash, id): one probe usually settles a lookup, where a node-based
  // map costs several cache misses; lookups run per character pair while encoding and millions
  // of times while resolving merges at load.
  struct IndexSlot {
    uint64_t hash = 0;
    int32_t id = kNoToken;
  };
  std::vector<IndexSlot> index_;
};

// Reads tokens, types, scores and special ids for a tokenizer of the given kind (the caller has
// mapped tokenizer.ggml.model to it), with llama.cpp's defaults for absent keys.
util::Result<Vocab> load_vocab(const gguf::File& file, ModelKind kind);

// The byte a <0xXX> token stands for, or -1 if the text is not of that form.
int parse_byte_token(std::string_view text);

}  // namespace tokenizer
