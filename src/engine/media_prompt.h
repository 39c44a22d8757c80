// What a request with images or audio needs before it reaches the scheduler, for the CLI and the
// server alike: the vocabulary's media markers, each medium decoded and prepared within what the
// engine was planned for, and the prompt's placeholders widened into the media's spans.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "engine/request.h"
#include "mm/media.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace engine {

// The media markers of the tokenizer's vocabulary (<|image>, <|image|>, <image|>, the audio ones);
// −1 where it has none.
mm::MediaTokens media_tokens(const tokenizer::Tokenizer& tokenizer);

// Decodes and prepares one image or clip for `engine`: an image for `image_tokens` soft tokens (0:
// the run's budget, --image-tokens; a request may ask for a smaller supported budget), a clip of
// at most the run's --audio-seconds. Errors are one line: what is wrong and what to do.
util::Result<std::shared_ptr<const mm::Media>> prepare_media(const Engine& engine,
                                                             mm::MediaKind kind,
                                                             std::span<const uint8_t> bytes,
                                                             int image_tokens = 0);

// Sets the request's prompt to `ids` with each placeholder (<|image|>, <|audio|>) widened into
// its medium's span, `media` taken in order per kind, and the request's media spans to match.
util::Status attach_media(Request& request, std::vector<int32_t> ids,
                          std::span<const std::shared_ptr<const mm::Media>> media,
                          const Engine& engine, const tokenizer::Tokenizer& tokenizer);

}  // namespace engine
