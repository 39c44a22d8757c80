// What the request and schema fuzz targets share: the shipped stories260K vocabulary (loaded once)
// and running a compiled response_format or tool-call constraint for a few tokens.
#pragma once

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace fuzz {

// models/stories260K.gguf from the source tree (HEADROOM_FUZZ_MODEL overrides); aborts when
// missing.
const tokenizer::Tokenizer& vocabulary();

// Compiles `response_format`; if it compiles, masks the logits and takes the most likely allowed
// token a few times, as generation would.
void run_response_format(const nlohmann::ordered_json& response_format,
                         const tokenizer::Tokenizer& tok);
// The same for forced tool calls to these OpenAI tools (Hermes' syntax: the vocabulary has no
// special tokens for any other).
void run_tool_calls(const nlohmann::ordered_json& tools, const tokenizer::Tokenizer& tok);

}  // namespace fuzz
