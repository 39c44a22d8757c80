// The vocabulary of a Hugging Face checkpoint as GGUF tokenizer metadata, written the way
// llama.cpp's converter writes it (tokenizer.ggml.*), from tokenizer.json (BPE) or
// tokenizer.model (SentencePiece), with the special tokens and chat template of
// tokenizer_config.json / config.json.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/writer.h"
#include "util/result.h"

namespace convert {

enum class VocabStyle {
  kLlama,   // tokenizer.model → "llama" (SentencePiece); else tokenizer.json → "llama" (byte-
            // fallback BPE) or "gpt2" (byte-level BPE, pre-tokenizer recognised by its regex)
  kGemma4,  // tokenizer.json → "gemma4" (BPE over UTF-8 with byte fallback, merges required)
};

struct VocabInfo {
  int64_t n_tokens = 0;
  std::string model;  // tokenizer.ggml.model written
};

// Adds the tokenizer keys to `writer`. `n_vocab` is the model's vocabulary size from config.json
// (0 if unknown): SentencePiece and byte-level vocabularies are padded to it with [PADn] tokens
// as llama.cpp pads them. Errors name the file: no tokenizer, an unsupported tokenizer type or
// pre-tokenizer, malformed JSON or protobuf.
util::Result<VocabInfo> add_hf_tokenizer(gguf::Writer& writer, const std::string& dir,
                                         VocabStyle style, int64_t n_vocab);

}  // namespace convert
