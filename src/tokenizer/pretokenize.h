// Pre-tokenizers of byte-level BPE vocabularies: the regex word splits named by tokenizer.ggml.pre,
// implemented by hand over Unicode classes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace tokenizer {

// Each kind is the sequence of split rules (regexes) of the tokenizer.json pre-tokenizer it
// names, as llama.cpp names them. Every rule splits each piece left by the rules before it.
enum class PreTokenizer {
  kDefault,        // "default" and files without tokenizer.ggml.pre (e.g. gpt-neox)
  kGpt2,           // "gpt-2", "mpt"
  kFalcon,         // "falcon"
  kStarcoder,      // "starcoder", "refact"
  kDeepseekCoder,  // "deepseek-coder"
  kDeepseekLlm,    // "deepseek-llm"
};

// The kind for a tokenizer.ggml.pre value, or an error naming it and listing the supported ones.
util::Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name);
// "default, gpt-2, mpt, ..." for messages.
std::string supported_pre_tokenizer_names();

// A word: text[begin, end).
struct ByteSpan {
  size_t begin;
  size_t end;
};

// Splits text into words covering it in order, as the named regexes split it. Never fails:
// a byte that is not valid UTF-8 is a word character of its own class (like U+FFFD).
void split_words(PreTokenizer kind, std::string_view text, std::vector<ByteSpan>& words);

}  // namespace tokenizer
