// mm::Media — one image or audio clip of a request, decoded and prepared (an image resized to its
// token budget, a clip at 16 kHz) when the request is made, and encoded when its turn comes; and
// the token spans that stand for it in the prompt.
//
// In the prompt each medium is its begin marker, n soft tokens and its end marker (Gemma 4's
// processor: <|image> + n × <|image|> + <image|>, <|audio> + n × <|audio|> + <audio|>). Chat
// templates write one placeholder (<|image|>, <|audio|>) where a content part goes;
// expand_media() widens each into its span, in order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "mm/image.h"
#include "mm/projector.h"
#include "model/spec.h"
#include "util/result.h"

namespace mm {

enum class MediaKind { kImage, kAudio };
std::string_view media_kind_name(MediaKind kind);  // "image", "audio"

struct Media {
  MediaKind kind = MediaKind::kImage;
  int n_tokens = 0;            // soft tokens it becomes
  Image image;                 // resized to the budget (images)
  std::vector<float> samples;  // mono, 16 kHz (audio)
  // Of the content and the budget: two media with equal hashes encode to the same embeddings, so
  // a prefix cache must key on it (the soft token ids are the same for every image).
  uint64_t hash = 0;
};

// Decodes and prepares an image for `image_tokens` soft tokens at most (one of the supported
// budgets). Errors are one line: what is wrong with the image and what to do.
util::Result<std::shared_ptr<const Media>> prepare_image(std::span<const uint8_t> bytes,
                                                         const VisionSpec& vision,
                                                         int image_tokens);
// Decodes a clip of at most `max_seconds` and resamples it to 16 kHz.
util::Result<std::shared_ptr<const Media>> prepare_audio(std::span<const uint8_t> bytes,
                                                         double max_seconds);

// The marker tokens of the text model's vocabulary; −1 where it has none.
struct MediaTokens {
  int32_t image_begin = -1, image = -1, image_end = -1;
  int32_t audio_begin = -1, audio = -1, audio_end = -1;
};
// Looks the markers up by their text through `lookup` (the tokenizer's).
MediaTokens find_media_tokens(
    const std::function<std::optional<int32_t>(std::string_view)>& lookup);

// A medium's place in a prompt: its soft tokens are positions [first, first + n_tokens).
struct MediaSpan {
  int first = 0;
  int n_tokens = 0;
  // Its tokens attend each other both ways (an image, on a model that sees images so).
  bool both_ways = false;
  std::shared_ptr<const Media> media;
  int last() const { return first + n_tokens - 1; }
};

// Whether a text model attends among one image's tokens both ways. Hugging Face's configs set
// use_bidirectional_attention "vision" for Gemma 4 31B and 26B-A4B and leave it off for E2B/E4B;
// the GGUF does not carry it, so it is told by the per-layer embeddings only E2B/E4B have. Only
// sliding layers see an image both ways (all of it, whatever the window); full layers stay causal.
bool sees_images_both_ways(const model::Spec& text);

// Widens each placeholder of `ids` (tokens.image / tokens.audio) into its medium's span, taking
// `media` in order per kind. Refuses counts that do not match and a model without the markers.
util::Result<std::vector<MediaSpan>> expand_media(
    std::vector<int32_t>& ids, const MediaTokens& tokens,
    std::span<const std::shared_ptr<const Media>> media, bool images_both_ways);

}  // namespace mm
