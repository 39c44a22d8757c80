// Tokenizer: text to token ids and back for the vocabulary of a GGUF file (SentencePiece,
// byte-level BPE, Gemma 4 BPE, WordPiece), and StreamDecoder for generated text.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/file.h"
#include "tokenizer/vocab.h"
#include "util/result.h"

namespace tokenizer {

struct EncodeOptions {
  // Add the special tokens the file asks for: BOS when tokenizer.ggml.add_bos_token is set (true
  // by default for SentencePiece files, which predate the key), EOS when add_eos_token is set,
  // and [CLS] ... [SEP] for WordPiece. A BOS the text already starts with (parse_special) is not
  // added a second time.
  bool add_bos = true;
  // Turn the text of control tokens ("<s>", "<start_of_turn>", ...) into those tokens. Only for
  // text rendered from a chat template; user text must never become control tokens. User-defined
  // tokens are matched either way, as llama.cpp and HF tokenizers do.
  bool parse_special = false;
};

class Tokenizer {
 public:
  // Builds the tokenizer named by tokenizer.ggml.model (and .pre for byte-level BPE). Errors name
  // the missing or unsupported key and list what is supported. The tokenizer copies what it
  // needs: `file` may be closed afterwards. Copies share one immutable state and may be used from
  // several threads at once.
  static util::Result<Tokenizer> from_gguf(const gguf::File& file);

  // Never fails: any byte string encodes (bytes without a token fall back to byte tokens or, for
  // vocabularies without them, to the unknown token).
  std::vector<int32_t> encode(std::string_view text, EncodeOptions opts = {}) const;

  // The text of `ids`. Control tokens are hidden unless render_special; user-defined tokens are
  // shown; the unknown token and ids outside the vocabulary become U+FFFD. For vocabularies that
  // add a dummy space before text (SentencePiece with add_space_prefix, WordPiece) the first text
  // token's leading space is dropped, so decode(encode(s)) == s where the tokenizer is lossless.
  // Bytes are returned as the tokens spell them, even when they are not valid UTF-8.
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;
  // The bytes one token stands for, as decode renders it (no leading-space rule); a byte token
  // gives its single byte.
  std::string piece(int32_t id, bool render_special = false) const;

  // The token's text as stored in the vocabulary ("▁Once", "Ġthe", "<0x0A>"); "" when out of range.
  std::string_view token_text(int32_t id) const;
  // kUndefined when out of range.
  TokenType token_type(int32_t id) const;
  int32_t n_vocab() const;
  ModelKind kind() const;
  // tokenizer.ggml.model as given: "llama", "gpt2", "gemma4" or "bert".
  std::string_view model_name() const;

  int32_t bos() const;  // kNoToken when the file has none
  int32_t eos() const;
  bool add_bos() const;  // whether encode adds BOS (with opts.add_bos)

  // End of generation: EOS, EOT (tokenizer.ggml.eot_token_id) and the control tokens that end a
  // turn, recognised by their text (<turn|>, <eos>, <end_of_turn>, <|eot_id|>, <|im_end|>, ...).
  bool is_end_of_generation(int32_t id) const;
  const std::vector<int32_t>& end_of_generation() const;  // sorted

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Turns generated ids into text as they arrive. Each push returns only whole UTF-8 characters:
// a character split across byte tokens (emoji, CJK under byte fallback) is held back until it is
// complete. Output is always valid UTF-8: bytes that cannot form a character become U+FFFD.
// Unlike decode, no leading space is dropped: the output continues text already shown.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool render_special = false);
  std::string push(int32_t id);
  // Ends the stream: an incomplete character still held back becomes U+FFFD.
  std::string flush();

 private:
  std::string take_complete();
  Tokenizer tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace tokenizer
