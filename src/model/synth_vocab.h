// The built-in vocabularies synth writes when no --vocab is given: SentencePiece-style for llama,
// Gemma 4's layout (its special tokens at their real ids, spec §5.1) for gemma4.
#pragma once

#include <string>

#include "gguf/writer.h"
#include "util/result.h"

namespace model {

// A small SentencePiece-style vocabulary: <unk> <s> </s>, 256 byte tokens, common pieces, then
// unused tokens up to n_vocab (at least 300).
util::Status write_llama_vocab(gguf::Writer& w, int n_vocab);

// A Gemma 4 BPE vocabulary (tokenizer model "gemma4", spec §5.2): the control and user-defined
// tokens of spec §5.1 at their ids (turns, tool declarations and calls, the string delimiter,
// thinking and the channel markers), the newline runs at 107–109, byte fallback at 238–493,
// printable ASCII and a few merged words in the free ids, unused tokens up to n_vocab (at least
// 512). `chat_template` (the model's Jinja template) is stored as tokenizer.chat_template when
// not empty.
util::Status write_gemma4_vocab(gguf::Writer& w, int n_vocab, const std::string& chat_template);

}  // namespace model
